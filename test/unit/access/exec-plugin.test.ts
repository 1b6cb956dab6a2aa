import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AccessError } from "../../../src/access/errors.ts";
import { type ExecPlugin, runExecPlugin } from "../../../src/access/exec-plugin.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { fixturePlugin } from "../../fixtures/plugins/index.ts";
import { capturingLogger, scratchDir, testdataPath } from "./support.ts";

const scratch = scratchDir();

const cluster = {
  server: "https://spoke.example:6443",
  "certificate-authority-data": "Q0E=",
  config: { clusterName: "spoke-1" },
};

function plugin(command: string, overrides: Partial<ExecPlugin> = {}): ExecPlugin {
  return {
    providerName: "fixture",
    apiVersion: "client.authentication.k8s.io/v1",
    command,
    args: [],
    env: [],
    provideClusterInfo: true,
    installHint: undefined,
    ...overrides,
  };
}

const run = (p: ExecPlugin, timeoutMs = 5_000, logger = silentLogger) =>
  runExecPlugin(p, cluster, { timeoutMs, logger });

async function failure(promise: Promise<unknown>): Promise<AccessError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AccessError);
  expect((err as AccessError).reason).toBe("AccessProviderFailed");
  return err as AccessError;
}

describe("runExecPlugin", () => {
  it("returns the plugin's credential", async () => {
    const credential = await run(
      plugin(fixturePlugin("token"), { env: [{ name: "FIXTURE_TOKEN", value: "abc" }] }),
    );
    expect(credential.token).toBe("abc");
  });

  it("passes the cluster in KUBERNETES_EXEC_INFO, the args, and the env on top of its own", async () => {
    const capture = join(scratch, "capture-env");
    process.env.FIXTURE_ENV_PROBE = "from-process";
    try {
      await run(
        plugin(fixturePlugin("token"), {
          args: ["--cluster", "spoke-1"],
          env: [
            { name: "FIXTURE_CAPTURE", value: capture },
            { name: "FIXTURE_ENV_PROBE", value: "from-exec-config" },
          ],
        }),
      );
    } finally {
      delete process.env.FIXTURE_ENV_PROBE;
    }
    expect(JSON.parse(readFileSync(capture, "utf8"))).toEqual({
      apiVersion: "client.authentication.k8s.io/v1",
      kind: "ExecCredential",
      spec: { cluster, interactive: false },
    });
    expect(readFileSync(`${capture}.args`, "utf8")).toBe("--cluster\nspoke-1\n");
    expect(readFileSync(`${capture}.env`, "utf8")).toBe("from-exec-config");
  });

  it("gives the plugin none of the service's own environment, only PATH and HOME", async () => {
    const capture = join(scratch, "capture-service-env");
    process.env.FIXTURE_ENV_PROBE = "the service's own secret";
    try {
      await run(plugin(fixturePlugin("token"), { env: [{ name: "FIXTURE_CAPTURE", value: capture }] }));
    } finally {
      delete process.env.FIXTURE_ENV_PROBE;
    }
    expect(readFileSync(`${capture}.env`, "utf8")).toBe("");
  });

  it("reports a leaky plugin's Error: line, redacted, and logs nothing secret", async () => {
    const logged = capturingLogger();
    const err = await failure(run(plugin(fixturePlugin("leaky")), 5_000, logged.logger));
    expect(err.message).toBe(
      'access provider "fixture": plugin ' +
        `${fixturePlugin("leaky")} exited with code 1: Error: secret fleet-system/spoke-1 has no key "token"; ` +
        "client-key-data: <redacted>",
    );
    for (const leaked of ["eyJhbGci", "s3cr3t-b34r3r", "MHcCAQEE", "LS0tLS1CRUdJTi", "Usage:"]) {
      expect(err.message).not.toContain(leaked);
      expect(logged.text()).not.toContain(leaked);
    }
  });

  it("gives no cluster when provideClusterInfo is off", async () => {
    const capture = join(scratch, "capture-no-cluster");
    await run(
      plugin(fixturePlugin("token"), {
        provideClusterInfo: false,
        env: [{ name: "FIXTURE_CAPTURE", value: capture }],
      }),
    );
    expect(JSON.parse(readFileSync(capture, "utf8")).spec).toEqual({ interactive: false });
  });

  it("kills a plugin that hangs, with everything it started, after the timeout", async () => {
    const pidFile = join(scratch, "pid");
    const started = Date.now();
    const err = await failure(
      run(plugin(fixturePlugin("hanging"), { env: [{ name: "FIXTURE_PID_FILE", value: pidFile }] }), 500),
    );
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(err.message).toBe(
      `access provider "fixture": plugin ${fixturePlugin("hanging")} did not finish within 0.5s and was killed; ` +
        "check that it does not wait for input or for a server that does not answer",
    );
    const grandchild = Number(readFileSync(pidFile, "utf8"));
    await expect.poll(() => isAlive(grandchild), { timeout: 2_000 }).toBe(false);
  });

  it("reports a non-zero exit with the plugin's last word on stderr", async () => {
    const err = await failure(run(plugin(fixturePlugin("exit-nonzero"))));
    expect(err.message).toBe(
      `access provider "fixture": plugin ${fixturePlugin("exit-nonzero")} exited with code 3: ` +
        '[fixture] failed to get secret fleet-system/missing: secrets "missing" not found',
    );
  });

  it("reports output that is not an ExecCredential without quoting it", async () => {
    const err = await failure(run(plugin(fixturePlugin("garbage"))));
    expect(err.message).toContain("returned an unusable answer: the plugin's stdout (42 bytes, not shown");
    expect(err.message).not.toContain("garbage-secret-token");
  });

  it("reports an answer in another apiVersion", async () => {
    const p = plugin(fixturePlugin("token"), {
      env: [{ name: "FIXTURE_API_VERSION", value: "client.authentication.k8s.io/v1beta1" }],
    });
    const err = await failure(run(p));
    expect(err.message).toContain("answered with apiVersion client.authentication.k8s.io/v1beta1");
  });

  it("reports a missing plugin with the install hint", async () => {
    const err = await failure(
      run(plugin("/nonexistent/secretreader", { installHint: "Build it: make build-secretreader-plugin" })),
    );
    expect(err.message).toBe(
      'access provider "fixture": plugin /nonexistent/secretreader was not found; install it or fix ' +
        "execConfig.command in the provider file. Build it: make build-secretreader-plugin",
    );
  });

  it("reports a plugin that is not executable", async () => {
    const err = await failure(run(plugin(testdataPath("ca.crt"))));
    expect(err.message).toContain("cannot be executed (permission denied)");
  });

  it("logs stderr on failure and never a credential on success", async () => {
    const failed = capturingLogger();
    await failure(run(plugin(fixturePlugin("exit-nonzero")), 5_000, failed.logger));
    expect(failed.lines()).toContainEqual(
      expect.objectContaining({
        level: 40,
        msg: "credential plugin failed",
        stderr: '[fixture] failed to get secret fleet-system/missing: secrets "missing" not found',
      }),
    );

    const succeeded = capturingLogger();
    await run(
      plugin(fixturePlugin("token"), { env: [{ name: "FIXTURE_TOKEN", value: "tok-123" }] }),
      5_000,
      succeeded.logger,
    );
    expect(succeeded.lines()).toContainEqual(
      expect.objectContaining({ msg: "credential plugin ran", credential: "bearer token" }),
    );
    expect(succeeded.text()).not.toContain("tok-123");
  });

  it("stops a run when asked to", async () => {
    const controller = new AbortController();
    const running = runExecPlugin(plugin(fixturePlugin("hanging")), cluster, {
      timeoutMs: 10_000,
      logger: silentLogger,
      signal: controller.signal,
    });
    controller.abort();
    expect((await failure(running)).message).toContain(
      "was stopped because the request for credentials was cancelled",
    );
  });
});

// A killed process whose parent died too may stay a zombie until PID 1 reaps it: that counts as dead.
function isAlive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}
