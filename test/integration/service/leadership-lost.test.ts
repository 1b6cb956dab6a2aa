import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { crText } from "../../support/fleet-files.ts";
import { startFleetProcess } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { freezableHubPath, type startFreezableForwarder } from "../../support/loopback-proxies.ts";
import type { ServiceProcess } from "../../support/service-process.ts";
import { waitUntil } from "../../support/wait.ts";

// Two `knative-fleet run` replicas with leader election (production timings: 15 s lease, 10 s renew
// deadline). The leader's path to the hub freezes (connections accepted, then nothing: a network partition)
// while a sync of a new commit is on its way to the hub. Its renewals fail, and at the renew deadline it must
// stop being the leader at once, 5 s before the Lease may go to the other replica: the soak found a leader
// that drained its in-flight sync first, reporting itself leader (and free to finish that sync, and a status
// commit) for seconds after the other replica had taken over.

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const NAMESPACE = "leadership-lost";
const REPO = "leadership-lost";

let git: GitServer;
let forwarder: Awaited<ReturnType<typeof startFreezableForwarder>>;
const replicas: ServiceProcess[] = [];
const scratch = mkdtempSync(join(tmpdir(), "knative-fleet-leadership-lost-"));

beforeAll(async () => {
  await installFleetCrds(hub);
  await ensureNamespace(hub, NAMESPACE);
  git = await startGitServer();
  await git.createRepo(REPO, { "README.md": "an empty fleet\n" });
  // The first replica reaches the hub through the forwarder; the second directly.
  const path = await freezableHubPath(sandbox.hub, scratch);
  forwarder = path.forwarder;
  const kubeconfig = path.kubeconfig;
  const start = (name: string, hubKubeconfig: string) =>
    startFleetProcess({
      sandbox: { ...sandbox, hub: { ...sandbox.hub, adminKubeconfig: hubKubeconfig } },
      service: {
        repositoryUrl: git.url(REPO),
        namespace: NAMESPACE,
        leaderElection: { leaseName: "knative-fleet", namespace: NAMESPACE },
      },
      config: { logLevel: "info", pollSchedule: "* * * * * *" },
      scratch,
      name,
    });
  replicas.push(start("partitioned", kubeconfig));
  await waitUntil("the first replica leads", async () =>
    (await replicas[0]!.metric("knative_fleet_leader")) === 1 ? true : undefined,
  );
  replicas.push(start("standby", sandbox.hub.adminKubeconfig));
  await waitUntil("the standby ready", async () =>
    (await replicas[1]!.get("/readyz")).status === 200 ? true : undefined,
  );
}, 120_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  await forwarder?.close();
  await git?.close();
  for (const cr of (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: NAMESPACE })).items)
    await hub.mergePatch(OPERATOR_API_VERSION, cr.kind, NAMESPACE, cr.metadata.name!, {
      metadata: { finalizers: null },
    });
  await hub.delete("v1", "Namespace", undefined, NAMESPACE);
});

it("a leader cut off from the hub stops leading at the renew deadline, before the other replica takes over", async () => {
  const [partitioned, standby] = replicas as [ServiceProcess, ServiceProcess];
  forwarder.freeze();
  const frozenAt = performance.now();
  // A commit the partitioned leader fetches from Git and tries to mirror: its sync hangs on the hub.
  await git.pushChange(REPO, {
    message: "a CR",
    files: { "clusters/one.yaml": crText({ name: "one", namespace: NAMESPACE, cluster: "nowhere" }) },
  });
  const overlaps: string[] = [];
  let exitedAt: number | undefined;
  void partitioned.exited.then(() => (exitedAt = performance.now()));
  const takenOverAt = await waitUntil(
    "the standby leads",
    async () => {
      const [a, b] = await Promise.all([
        partitioned.metric("knative_fleet_leader"),
        standby.metric("knative_fleet_leader"),
      ]);
      const at = performance.now();
      if (a === 1 && b === 1)
        overlaps.push(`both lead ${((at - frozenAt) / 1000).toFixed(1)} s after the partition`);
      return b === 1 ? at : undefined;
    },
    60_000,
  );
  console.log(
    `leadership lost: the partitioned leader exited ${exitedAt === undefined ? "not yet" : `${((exitedAt - frozenAt) / 1000).toFixed(1)} s`} and the standby led ${((takenOverAt - frozenAt) / 1000).toFixed(1)} s after the partition`,
  );
  expect(overlaps).toEqual([]);
  expect(exitedAt, "the partitioned leader exits before the standby leads").toBeLessThan(takenOverAt);
  expect((await partitioned.exited).code).toBe(1);
  expect(partitioned.logTail(100)).toContain(
    "leadership lost; stopping so a fresh start rejoins the election",
  );
}, 120_000);
