import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { describe, expect, it, onTestFinished } from "vitest";
import { crText } from "../../support/fleet-files.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { fleetRepo, runPlan } from "./support.ts";

// A live plan whose hub cannot be read (down, moved, a rotated kubeconfig in CI) still prints the plan,
// offline, with one line saying which hub and why: never a stack frame in place of the PR comment.

const SLOW = { timeout: 60_000 };
const SERVING = "clusters/spoke-1/knative-serving.yaml";

/** A loopback port that refuses connections: opened to get a free one, then closed again. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  return port;
}

describe("a live plan whose hub refuses the connection", SLOW, () => {
  it("prints the offline plan with one ⚠️ line naming the hub and the failure in words, no stack, exit 2", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", {});
    await repo.commit("change", {
      [SERVING]: crText({ name: "spoke-1-serving", cluster: "spoke-1", spec: {}, version: "1.21" }),
    });
    const port = await closedPort();
    const server = `https://127.0.0.1:${port}`;
    const kubeconfig = writeTokenKubeconfig({ server, "insecure-skip-tls-verify": true }, "t");
    const args = ["--repo", repo.dir, "--base", "main", "--head", "change", "--kubeconfig", kubeconfig];
    const live = await runPlan(...args);
    const offline = await runPlan("--repo", repo.dir, "--base", "main", "--head", "change");

    expect(live.code).toBe(2);
    const warning = `cannot reach the hub ${server}: connection refused (ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:${port})`;
    const lines = live.stdout.split("\n");
    expect(lines.filter((line) => line.includes("cannot reach the hub"))).toEqual([
      `⚠️ **Offline**: ${warning}; no cluster was read, each CR's rendered base is compared with its rendered head.  `,
    ]);
    expect(live.stderr).toBe(`knative-fleet plan: ⚠️ ${warning}: planned offline\n`);
    // The verdict agrees with the exit code: never ✅ under the ⚠️ Offline line.
    const verdicts = lines.filter((line) => /^(✅|❌|⚠️ \*\*Offline plan)/.test(line));
    expect(verdicts).toEqual(["⚠️ **Offline plan**: the hub could not be read; no errors, no warnings."]);
    expect(offline.stdout).toContain("\n✅ No errors, no warnings.\n");
    expect(offline.code).toBe(0);
    for (const text of [live.stdout, live.stderr]) expect(text).not.toMatch(/^\s+at |TCPConnectWrap/m);
    // The plan itself is the offline plan: the same table and the same sections.
    const body = (text: string) => text.slice(text.indexOf("| Cluster |"));
    // Offline is said once, at the top: no CR's section says it again.
    expect(body(live.stdout)).toBe(body(offline.stdout));
    for (const text of [body(live.stdout), body(offline.stdout)]) expect(text).not.toMatch(/Offline|offline/);
    expect(live.stdout).toMatch(/ create 1\.21\.\d+ \| \+\d+ ~0 -0 \|/);

    const json = await runPlan("-o", "json", ...args);
    expect(json.code).toBe(2);
    expect(JSON.parse(json.stdout)).toMatchObject({ source: "offline", offlineReason: warning });
  });

  it("a hub that refuses the credentials (a rotated kubeconfig) is named with the server's answer, exit 2", async () => {
    const repo = await fleetRepo();
    await repo.commit("main", {});
    await repo.commit("change", {
      [SERVING]: crText({ name: "spoke-1-serving", cluster: "spoke-1", spec: {}, version: "1.21" }),
    });
    const hub = createHttpServer((_, response) => {
      response.writeHead(401, { "content-type": "application/json" });
      response.end(
        JSON.stringify({
          kind: "Status",
          status: "Failure",
          reason: "Unauthorized",
          message: "Unauthorized",
          code: 401,
        }),
      );
    });
    await new Promise<void>((resolve) => hub.listen(0, "127.0.0.1", resolve));
    onTestFinished(() => new Promise<void>((resolve) => hub.close(() => resolve())));
    const server = `http://127.0.0.1:${(hub.address() as { port: number }).port}`;
    const kubeconfig = writeTokenKubeconfig({ server }, "rotated");
    const live = await runPlan(
      "--repo",
      repo.dir,
      "--base",
      "main",
      "--head",
      "change",
      "--kubeconfig",
      kubeconfig,
    );
    expect(live.code).toBe(2);
    expect(live.stderr).toMatch(
      new RegExp(
        `^knative-fleet plan: ⚠️ cannot read the ClusterProfiles on the hub ${server}: .*Unauthorized.*: planned offline\n$`,
      ),
    );
    expect(live.stdout).toContain(`⚠️ **Offline**: cannot read the ClusterProfiles on the hub ${server}: `);
  });
});
