import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ExecAuthenticator, PluginRunSlots } from "../../../src/access/exec-authenticator.ts";
import type { EnvVar } from "../../../src/access/provider-config.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { fixturePlugin } from "../../fixtures/plugins/index.ts";
import { scratchDir } from "./support.ts";

const scratch = scratchDir();

/** An authenticator for the token fixture, whose runs are counted in a file, and a clock the test moves. */
function tokenAuthenticator(env: EnvVar[] = [], command = fixturePlugin("token"), runs?: PluginRunSlots) {
  const runLog = join(mkdtempSync(join(scratch, "authenticator-")), "runs");
  writeFileSync(runLog, "");
  let offsetMs = 0;
  const authenticator = new ExecAuthenticator(
    {
      providerName: "fixture",
      apiVersion: "client.authentication.k8s.io/v1",
      command,
      args: [],
      env: [{ name: "FIXTURE_RUN_LOG", value: runLog }, ...env],
      provideClusterInfo: true,
      installHint: undefined,
    },
    { server: "https://spoke.example:6443" },
    {
      pluginTimeoutMs: 5_000,
      refreshBeforeExpiryMs: 60_000,
      logger: silentLogger,
      now: () => new Date(Date.now() + offsetMs),
      ...(runs && { runs }),
    },
  );
  return {
    authenticator,
    runs: () => readFileSync(runLog, "utf8").split("\n").filter(Boolean).length,
    advance: (ms: number) => {
      offsetMs += ms;
    },
  };
}

describe("ExecAuthenticator", () => {
  it("runs the plugin once and reuses a credential without expiry", async () => {
    const { authenticator, runs } = tokenAuthenticator();
    const first = await authenticator.credential();
    expect(await authenticator.credential()).toBe(first);
    expect(runs()).toBe(1);
    expect(authenticator.pluginRuns).toBe(1);
  });

  it("runs the plugin once for many concurrent callers", async () => {
    const { authenticator, runs } = tokenAuthenticator([{ name: "FIXTURE_DELAY_SECONDS", value: "0.3" }]);
    const credentials = await Promise.all(Array.from({ length: 20 }, () => authenticator.credential()));
    expect(new Set(credentials).size).toBe(1);
    expect(runs()).toBe(1);
  });

  it("renews a credential shortly before it expires, not at every call", async () => {
    const { authenticator, runs, advance } = tokenAuthenticator([
      { name: "FIXTURE_TTL_SECONDS", value: "3600" },
    ]);
    const first = await authenticator.credential();
    advance(3_500_000); // 100 s left: more than refreshBeforeExpiryMs
    expect(await authenticator.credential()).toBe(first);
    advance(60_000); // 40 s left
    const renewed = await authenticator.credential();
    expect(renewed).not.toBe(first);
    expect(runs()).toBe(2);
  });

  it("keeps a short-lived credential for half its life instead of renewing it on every call", async () => {
    const { authenticator, runs, advance } = tokenAuthenticator([
      { name: "FIXTURE_TTL_SECONDS", value: "20" },
    ]);
    const first = await authenticator.credential();
    advance(5_000);
    expect(await authenticator.credential()).toBe(first);
    advance(6_000);
    expect(await authenticator.credential()).not.toBe(first);
    expect(runs()).toBe(2);
  });

  it("asks the plugin again after a 401, once for a burst of rejections of the same credential", async () => {
    const { authenticator, runs } = tokenAuthenticator();
    const first = await authenticator.credential();
    authenticator.rejected(first);
    const second = await authenticator.credential();
    expect(second).not.toBe(first);
    authenticator.rejected(first); // a late 401 for the old credential leaves the new one alone
    expect(await authenticator.credential()).toBe(second);
    expect(runs()).toBe(2);
  });

  it("does not cache a failure: the next call runs the plugin again", async () => {
    const { authenticator } = tokenAuthenticator([], fixturePlugin("exit-nonzero"));
    await expect(authenticator.credential()).rejects.toThrow("exited with code 3");
    await expect(authenticator.credential()).rejects.toThrow("exited with code 3");
    expect(authenticator.pluginRuns).toBe(2);
  });

  it("stops a run in progress and refuses further calls once closed", async () => {
    const { authenticator } = tokenAuthenticator([], fixturePlugin("hanging"));
    const pending = authenticator.credential();
    authenticator.close();
    await expect(pending).rejects.toThrow("was stopped because the request for credentials was cancelled");
    await expect(authenticator.credential()).rejects.toThrow("cancelled");
  });
});

describe("plugin runs share the process's places", () => {
  it("at most `limit` hold a place at once; a place given back passes to the next waiting, once", async () => {
    const slots = new PluginRunSlots(2);
    const held: (() => void)[] = [];
    let started = 0;
    const takers = Array.from({ length: 5 }, () =>
      slots.take().then((release) => {
        started++;
        held.push(release);
      }),
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).toBe(2);
    held[0]!();
    held[0]!(); // given back twice: still one place
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).toBe(3);
    for (const release of held.splice(1)) release();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(started).toBe(5);
    for (const release of held) release();
    await Promise.all(takers);
    // Every place is free again: two take one at once.
    const again = await Promise.all([slots.take(), slots.take()]);
    for (const release of again) release();
  });

  it("a spoke's plugin does not start while every place is taken, and starts once one is free", async () => {
    const slots = new PluginRunSlots(1);
    const hold = await slots.take();
    const { authenticator, runs } = tokenAuthenticator([], fixturePlugin("token"), slots);
    const credential = authenticator.credential();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(runs()).toBe(0);
    hold();
    await credential;
    expect(runs()).toBe(1);
  });
});
