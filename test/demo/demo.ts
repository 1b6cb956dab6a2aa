/**
 * `npm run demo`: the whole story on a local sandbox, then exit 0.
 *   sandbox (hub + 2 spokes) -> a git server holding fleet-example -> the reconciler (`knative-fleet run`)
 *   -> fleet-example Ready -> a push adds Serving to spoke-2 -> Ready -> the status commit
 *   -> a push removes it -> spoke-2 cleaned.
 * Everything runs on loopback and is torn down at the end (KEEP=1 leaves the sandbox and reconciler up).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import { down, up } from "../sandbox/sandbox.ts";
import { writeServiceConfig } from "../support/fleet-service.ts";
import { startGitServer } from "../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../support/hub.ts";
import { knativeReleasesDir, repoRoot } from "../support/shared.ts";
import { waitUntil } from "../support/wait.ts";

const started = Date.now();
const say = (message: string) =>
  process.stdout.write(`[demo ${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${message}\n`);

const stateDir = mkdtempSync(join(tmpdir(), "knative-fleet-demo-"));
const keep = process.env.KEEP === "1";
let reconciler: ChildProcess | undefined;

async function main(): Promise<void> {
  const kodata = knativeReleasesDir(); // the bundled releases; says where to get them when missing
  say(
    "starting the sandbox: a hub and 2 spokes (real kube-apiserver, etcd, controller-manager, scheduler, kwok)",
  );
  const sandbox = await up({ stateDir, spokes: 2, log: (m) => say(`sandbox: ${m}`) });
  const hub = adminClient(sandbox.hub);
  await installFleetCrds(hub);
  await ensureNamespace(hub, "knative-fleet");

  const git = await startGitServer();
  await git.createRepo("fleet", join(repoRoot, "fleet-example"));
  say(`git server: ${git.url("fleet")} holds fleet-example (Serving on spoke-1, Eventing on spoke-2)`);

  const config = writeServiceConfig({ repositoryUrl: git.url("fleet"), statusInterval: "2s" });
  const logFile = join(stateDir, "reconciler.log");
  reconciler = spawn(
    process.execPath,
    [
      join(repoRoot, "src", "cli.ts"),
      "run",
      "--config",
      config,
      "--clusterprofile-provider-file",
      sandbox.providerFile,
      "--kodata",
      kodata,
    ],
    { env: { ...process.env, KUBECONFIG: sandbox.hub.adminKubeconfig }, stdio: ["ignore", "pipe", "pipe"] },
  );
  const log = createWriteStream(logFile);
  reconciler.stdout?.pipe(log);
  reconciler.stderr?.pipe(log);
  say(`reconciler started: knative-fleet run --config ${config} (log: ${logFile})`);

  const ready = (kind: string, name: string) =>
    waitUntil(
      `${kind} ${name} Ready`,
      async () => {
        const cr = await hub.get(OPERATOR_API_VERSION, kind, "knative-fleet", name);
        return readyOf(cr) === "True" ? cr : undefined;
      },
      300_000,
    );
  await Promise.all([
    ready("KnativeServing", "spoke-1-serving"),
    ready("KnativeEventing", "spoke-2-eventing"),
  ]);
  say("fleet-example is Ready: Serving 1.21 + Kourier on spoke-1, Eventing on spoke-2");

  const pushed = Date.now();
  await git.pushChange("fleet", {
    message: "Add Knative Serving to spoke-2",
    files: {
      "clusters/spoke-2/knative-serving.yaml": [
        "apiVersion: operator.knative.dev/v1beta1",
        "kind: KnativeServing",
        "metadata:",
        "  name: spoke-2-serving",
        "  namespace: knative-fleet",
        "spec:",
        '  version: "1.23"',
        "  clusterProfileRef:",
        "    name: spoke-2",
        "    namespace: fleet-system",
        "  ingress:",
        "    kourier:",
        "      enabled: true",
        "",
      ].join("\n"),
    },
  });
  say("pushed: clusters/spoke-2/knative-serving.yaml (Serving 1.23, the newest release, on spoke-2)");
  const cr = await ready("KnativeServing", "spoke-2-serving");
  say(
    `spoke-2 Serving Ready (version ${(cr.status as { version?: string }).version}) ${((Date.now() - pushed) / 1000).toFixed(1)}s after the push`,
  );
  const spoke2 = adminClient(sandbox.spokes[1]!);
  const deployments = (await spoke2.list("apps/v1", "Deployment", { namespace: "knative-serving" })).items;
  say(`spoke-2 knative-serving Deployments: ${deployments.map((d) => d.metadata.name).join(", ")}`);

  const status = await waitUntil(
    "the status commit listing spoke-2-serving",
    async () => {
      const text = await git.readFile("fleet", "main", "status/README.md").catch(() => "");
      return /spoke-2-serving \| ✓/.test(text) ? text : undefined;
    },
    60_000,
  );
  const [last] = await git.log("fleet");
  say(`status committed by ${last?.authorName} ("${last?.subject}"); status/README.md:\n\n${status}`);

  const removed = Date.now();
  await git.pushChange("fleet", {
    message: "Remove Knative Serving from spoke-2",
    files: { "clusters/spoke-2/knative-serving.yaml": null },
  });
  say("pushed: removed clusters/spoke-2/knative-serving.yaml");
  await waitUntil(
    "spoke-2-serving gone from the hub",
    async () =>
      (await hub.get(OPERATOR_API_VERSION, "KnativeServing", "knative-fleet", "spoke-2-serving"))
        ? undefined
        : true,
    180_000,
  );
  await waitUntil(
    "spoke-2 cleaned",
    async () =>
      (await spoke2.list("apps/v1", "Deployment", { namespace: "knative-serving" })).items.length === 0
        ? true
        : undefined,
    180_000,
  );
  const anchor = await spoke2.get(
    "v1",
    "ConfigMap",
    "knative-serving",
    "knativeserving-spoke-2-serving-root-owner",
  );
  say(
    `spoke-2 cleaned ${((Date.now() - removed) / 1000).toFixed(1)}s after the push: anchor ${anchor ? "still there" : "deleted"}, Deployments garbage-collected; spoke-2 keeps its Eventing`,
  );

  if (keep) {
    say(
      `KEEP=1: leaving everything running. Sandbox: ${stateDir}; stop with 'npm run sandbox -- down --state-dir ${stateDir}'`,
    );
    return;
  }
  await stopReconciler();
  await git.close();
  say("done; tearing the sandbox down");
}

function readyOf(cr: KubeObject | undefined): string | undefined {
  return (cr?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.find(
    (c) => c.type === "Ready",
  )?.status;
}

async function stopReconciler(): Promise<void> {
  const child = reconciler;
  if (!child || child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

try {
  await main();
} catch (err) {
  process.stderr.write(
    `demo failed: ${(err as Error).message}\n(reconciler log and sandbox logs in ${stateDir})\n`,
  );
  process.exitCode = 1;
} finally {
  if (!keep) {
    await stopReconciler();
    await down(stateDir);
  }
}
