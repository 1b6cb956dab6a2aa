import { createHmac } from "node:crypto";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { nameOf } from "../../../src/kube/object.ts";
import { loadServiceConfig } from "../../../src/service/config.ts";
import type { FleetService } from "../../../src/service/service.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { runCli } from "../../support/cli.ts";
import { startServiceOnSandbox, writeServiceConfig } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { repoRoot } from "../../support/shared.ts";
import { waitUntil } from "../../support/wait.ts";
import { applyWrites, spokeWriteCount } from "../engine/metrics.ts";

const sandbox = loadSandbox();
const spoke2 = sandbox.spokes[1]!;
const REPO = "fleet";
/** The drift check's period here: each converged CR is read back from its spoke this often. */
const RESYNC_S = 10;
const SECRET = "push-secret";

/** A KnativeServing fleet file for a spoke, as a person would write it. */
const servingFile = (spoke: string, extra = "") => `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata:
  name: ${spoke}-serving
  namespace: knative-fleet
spec:
  version: "1.22"
  clusterProfileRef:
    name: ${spoke}
    namespace: fleet-system
  ingress:
    kourier:
      enabled: true
${extra}`;

describe("the GitOps loop: fleet repository -> hub CRs -> spokes -> status in Git", () => {
  let git: GitServer;
  let hub: KubeClient;
  let spokeTwo: KubeClient;
  let service: FleetService;
  const figures: Record<string, number> = {};

  const startService = async () => {
    const configPath = writeServiceConfig({
      repositoryUrl: git.url(REPO),
      webhookSecret: SECRET,
      resyncInterval: `${RESYNC_S}s`,
    });
    const s = await startServiceOnSandbox(sandbox, loadServiceConfig(configPath), "gitops-test");
    return s;
  };
  const hubCr = (kind: string, name: string) => hub.get(OPERATOR_API_VERSION, kind, "knative-fleet", name);
  const isReady = (cr: KubeObject | undefined) =>
    (cr?.status as { conditions?: { type: string; status: string }[] } | undefined)?.conditions?.some(
      (c) => c.type === "Ready" && c.status === "True",
    );
  const waitReady = (kind: string, name: string) =>
    waitUntil(
      `${kind} ${name} Ready`,
      async () => (isReady(await hubCr(kind, name)) ? true : undefined),
      240_000,
    );
  const statusReadme = () => git.readFile(REPO, "main", "status/README.md").catch((e) => `ERR ${e.message}`);
  const push = (files: Record<string, string | null>, message: string) =>
    git.pushChange(REPO, { files, message });
  const webhookPush = async (commit: string) => {
    const body = JSON.stringify({
      ref: "refs/heads/main",
      after: commit,
      commits: [{ added: [], modified: ["clusters/spoke-2/knative-serving.yaml"], removed: [] }],
    });
    const signature = `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
    const res = await fetch(`http://127.0.0.1:${service.webhookPort}/webhook`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "push",
        "x-hub-signature-256": signature,
      },
      body,
    });
    expect(res.status).toBeLessThan(300);
  };

  /** A broken spoke-2 file (`spoke2Extra`) beside a good change on spoke-1 (its grace period `from` -> `to`). */
  const pushBrokenBesideGood = async (spoke2Extra: string, from: string, to: string) => {
    const spoke1 = await git.readFile(REPO, "main", "clusters/spoke-1/knative-serving.yaml");
    await push(
      {
        "clusters/spoke-2/knative-serving.yaml": servingFile("spoke-2", spoke2Extra),
        "clusters/spoke-1/knative-serving.yaml": spoke1.replace(
          `scale-to-zero-grace-period: ${from}`,
          `scale-to-zero-grace-period: ${to}`,
        ),
      },
      "A broken file on spoke-2 and a good change on spoke-1",
    );
    await service.syncNow();
  };
  const gracePeriod = (value: string) => ({
    config: { autoscaler: { "scale-to-zero-grace-period": value } },
  });

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    spokeTwo = adminClient(spoke2);
    await installFleetCrds(hub);
    await ensureNamespace(hub, "knative-fleet");
    git = await startGitServer();
    await git.createRepo(REPO, join(repoRoot, "fleet-example"));
    service = await startService();
  });

  afterAll(async () => {
    await service?.stop();
    // Leave the shared sandbox clean: remove the fleet's CRs (their finalizers clean the spokes).
    for (const kind of ["KnativeServing", "KnativeEventing"]) {
      for (const cr of (await hub.list(OPERATOR_API_VERSION, kind, { namespace: "knative-fleet" })).items) {
        await hub
          .mergePatch(OPERATOR_API_VERSION, kind, "knative-fleet", nameOf(cr), {
            metadata: { finalizers: null },
          })
          .catch(() => {});
        await hub.delete(OPERATOR_API_VERSION, kind, "knative-fleet", nameOf(cr)).catch(() => {});
      }
    }
    await git?.close();
    console.log("gitops figures:", JSON.stringify(figures));
  });

  it("the fleet-example becomes Ready on both spokes and the status is committed back", async () => {
    const started = Date.now();
    await Promise.all([
      waitReady("KnativeServing", "spoke-1-serving"),
      waitReady("KnativeEventing", "spoke-2-eventing"),
    ]);
    figures.fleetExampleReadyMs = Date.now() - started;
    const cr = await hubCr("KnativeServing", "spoke-1-serving");
    expect(cr?.metadata.annotations?.["fleet.knative.dev/source-path"]).toBe(
      "clusters/spoke-1/knative-serving.yaml",
    );
    let text = "";
    const readme = await waitUntil("status committed with both Ready", async () => {
      text = await statusReadme();
      return /spoke-1-serving \| ✓ \| 1\.21\.3/.test(text) && /spoke-2-eventing \| ✓ \| 1\.21\.4/.test(text)
        ? text
        : undefined;
    }).catch((err: Error) => {
      throw new Error(`${err.message}; status/README.md is:\n${text}`);
    });
    expect(readme).toContain("fleet-system/spoke-1");
    const log = await git.log(REPO);
    expect(log[0]?.authorName).toBe("knative-fleet");
  });

  it("a push that adds Serving on spoke-2 reaches the spoke (webhook), and the status says so", async () => {
    const commit = await push(
      { "clusters/spoke-2/knative-serving.yaml": servingFile("spoke-2") },
      "Add Serving to spoke-2",
    );
    const started = Date.now();
    await webhookPush(commit);
    await waitUntil("hub CR created", async () => hubCr("KnativeServing", "spoke-2-serving"), 30_000);
    figures.webhookToHubCrMs = Date.now() - started;
    await waitReady("KnativeServing", "spoke-2-serving");
    figures.pushToSpokeReadyMs = Date.now() - started;
    const deployments = await spokeTwo.list("apps/v1", "Deployment", { namespace: "knative-serving" });
    expect(deployments.items.map((d) => d.metadata.name)).toContain("activator");
    await waitUntil("status lists spoke-2-serving", async () =>
      (await statusReadme()).includes("spoke-2-serving") ? true : undefined,
    );
  });

  it("a config edit in Git reaches the spoke", async () => {
    await push(
      {
        "clusters/spoke-2/knative-serving.yaml": servingFile(
          "spoke-2",
          '  config:\n    autoscaler:\n      enable-scale-to-zero: "false"\n',
        ),
      },
      "Disable scale to zero on spoke-2",
    );
    await service.syncNow();
    await waitUntil("config-autoscaler on spoke-2", async () => {
      const cm = await spokeTwo.get("v1", "ConfigMap", "knative-serving", "config-autoscaler");
      return (cm?.data as Record<string, string> | undefined)?.["enable-scale-to-zero"] === "false"
        ? true
        : undefined;
    });
  });

  /** A person's or a controller's write on spoke-2, with the field manager kubectl or the HPA would send. */
  const editOnSpoke = async (path: string, manager: string, patch: object) =>
    spokeTwo.rest.request({
      method: "PATCH",
      path,
      query: { fieldManager: manager },
      body: patch,
      // What kubectl edit and patch send: a strategic merge patch (containers merged by name).
      contentType: "application/strategic-merge-patch+json",
    });
  const HAND_EDITS = async () => {
    await editOnSpoke("/api/v1/namespaces/knative-serving/configmaps/config-autoscaler", "kubectl-edit", {
      data: { "enable-scale-to-zero": "true", _example: null, "max-scale": "5" },
    });
    await editOnSpoke(
      "/apis/apps/v1/namespaces/knative-serving/deployments/autoscaler/scale",
      "kube-controller-manager",
      {
        spec: { replicas: 2 },
      },
    );
    await editOnSpoke("/apis/apps/v1/namespaces/knative-serving/deployments/controller", "kubectl-edit", {
      spec: {
        template: { spec: { containers: [{ name: "controller", resources: { limits: { cpu: "2" } } }] } },
      },
    });
  };
  const spokeState = async () => {
    const cm = await spokeTwo.get("v1", "ConfigMap", "knative-serving", "config-autoscaler");
    const scaler = await spokeTwo.get("apps/v1", "Deployment", "knative-serving", "autoscaler");
    const controller = await spokeTwo.get("apps/v1", "Deployment", "knative-serving", "controller");
    const data = (cm?.data ?? {}) as Record<string, string>;
    const containers =
      (
        controller?.spec as
          | { template: { spec: { containers: { name: string; resources: { limits: { cpu: string } } }[] } } }
          | undefined
      )?.template.spec.containers ?? [];
    return {
      scaleToZero: data["enable-scale-to-zero"],
      example: "_example" in data,
      maxScale: data["max-scale"],
      replicas: (scaler?.spec as { replicas?: number } | undefined)?.replicas,
      cpu: containers.find((c) => c.name === "controller")?.resources.limits.cpu,
    };
  };
  const servingStatus = async () =>
    (await hubCr("KnativeServing", "spoke-2-serving"))?.status as
      | {
          conditions?: { type: string; status: string; reason?: string; message?: string }[];
          annotations?: Record<string, string>;
        }
      | undefined;
  const driftEvents = async (reason: string) =>
    (await hub.list("v1", "Event", { namespace: "knative-fleet" })).items.filter(
      (e) =>
        (e.involvedObject as { name?: string }).name === "spoke-2-serving" &&
        (e as { reason?: string }).reason === reason,
    ) as unknown as { message: string }[];
  /** Spoke writes over `seconds` at rest: server-side applies and any other write knative-fleet could make. */
  const writesAtRest = async (seconds: number) => {
    const [applies, writes] = [await applyWrites(spoke2), await spokeWriteCount(spoke2)];
    await new Promise((r) => setTimeout(r, seconds * 1000));
    return {
      applies: (await applyWrites(spoke2)) - applies,
      writes: (await spokeWriteCount(spoke2)) - writes,
    };
  };

  it("hand edits on the spoke are put back within one drift check, named with manager, fields and the fleet file line", async () => {
    await waitReady("KnativeServing", "spoke-2-serving");
    const edited = Date.now();
    await HAND_EDITS();
    const restored = await waitUntil(
      "the edits put back",
      async () => {
        const state = await spokeState();
        // The API server keeps a quantity in its canonical form: the release's 1000m reads back as 1.
        return state.scaleToZero === "false" && state.example && state.replicas === 1 && state.cpu === "1"
          ? state
          : undefined;
      },
      (RESYNC_S + 30) * 1000,
    );
    expect(restored).toBeDefined();
    figures.driftPutBackMs = Date.now() - edited;
    const events = await waitUntil("an Event per object", async () => {
      const found = await driftEvents("DriftCorrected");
      return found.length >= 3 ? found : undefined;
    });
    const text = events.map((e) => e.message).join("\n");
    expect(text).toContain("put back ConfigMap knative-serving/config-autoscaler changed by kubectl-edit");
    expect(text).toContain(
      'data.enable-scale-to-zero: "false" -> "true"; edit spec.config.autoscaler.enable-scale-to-zero in clusters/spoke-2/knative-serving.yaml:16 instead',
    );
    // The release's long _example, removed: its value cut short, and where it would go in the file.
    expect(text).toMatch(
      /data\._example: "#{16}[^;]*… -> \(absent\); set spec\.config\.autoscaler\._example in clusters\/spoke-2\/knative-serving\.yaml:15 instead/,
    );
    expect(text).toContain(
      "put back Deployment knative-serving/autoscaler changed by kube-controller-manager",
    );
    expect(text).toContain(
      "spec.replicas: 1 -> 2; set spec.workloads in clusters/spoke-2/knative-serving.yaml:6 instead",
    );
    expect(text).toContain(
      'spec.template.spec.containers[name=controller].resources.limits.cpu: "1000m" -> "2"',
    );
    // The key added by hand stays (an apply removes no field it does not own): reported at the next check, kept.
    const added = await waitUntil(
      "the added key reported as kept",
      async () => (await driftEvents("DriftKept")).find((e) => e.message.includes("data.max-scale")),
      (RESYNC_S + 30) * 1000,
    );
    expect(added.message).toContain(
      'data.max-scale: (absent) -> "5"; set spec.config.autoscaler.max-scale in clusters/spoke-2/knative-serving.yaml:15 instead',
    );
    expect((await spokeState()).maxScale).toBe("5");
    const status = await servingStatus();
    expect(status?.conditions?.find((c) => c.type === "Drifted")).toMatchObject({
      status: "True",
      reason: "DriftKept",
    });
    expect(JSON.parse(status?.annotations?.["fleet.knative.dev/last-drift"] ?? "[]")).toHaveLength(4);
    // Ready never moved: drift is Info.
    expect(isReady(await hubCr("KnativeServing", "spoke-2-serving"))).toBe(true);
    const rest = await writesAtRest(2 * RESYNC_S + 2);
    figures.correctModeWritesAtRest = rest.writes;
    expect(rest).toEqual({ applies: 0, writes: 0 });
  });

  it("report mode keeps the edits, says so on the CR and in an Event, and writes nothing at rest", async () => {
    await push(
      {
        "clusters/spoke-2/knative-serving.yaml": servingFile(
          "spoke-2",
          '  config:\n    autoscaler:\n      enable-scale-to-zero: "false"\n',
        ).replace(
          "  namespace: knative-fleet\n",
          "  namespace: knative-fleet\n  annotations:\n    fleet.knative.dev/drift: report\n",
        ),
      },
      "Report drift on spoke-2 instead of reverting it",
    );
    await service.syncNow();
    await waitUntil(
      "the annotation on the hub CR",
      async () =>
        (await hubCr("KnativeServing", "spoke-2-serving"))?.metadata.annotations?.[
          "fleet.knative.dev/drift"
        ] === "report"
          ? true
          : undefined,
      180_000,
    );
    await waitReady("KnativeServing", "spoke-2-serving");
    await HAND_EDITS();
    // An object deleted by hand stays deleted too.
    await spokeTwo.delete("v1", "ConfigMap", "knative-serving", "config-gc");
    const condition = await waitUntil(
      "Drifted True",
      async () =>
        (await servingStatus())?.conditions?.find((c) => c.type === "Drifted" && c.status === "True"),
      (RESYNC_S + 30) * 1000,
    );
    expect(condition.reason).toBe("DriftKept");
    expect(condition.message).toContain(
      "ConfigMap knative-serving/config-autoscaler changed by kubectl-edit",
    );
    const kept = await waitUntil("DriftKept Events of the edits and the deletion", async () => {
      const found = (await driftEvents("DriftKept")).filter((e) => !e.message.includes("data.max-scale"));
      return found.length >= 4 ? found : undefined;
    });
    expect(kept.map((e) => e.message).join("\n")).toContain(
      "kept ConfigMap knative-serving/config-gc deleted",
    );
    expect(kept.map((e) => e.message).join("\n")).toContain(
      "edit spec.config.autoscaler.enable-scale-to-zero in clusters/spoke-2/knative-serving.yaml:18 instead",
    );
    const rest = await writesAtRest(2 * RESYNC_S + 2);
    figures.reportModeWritesAtRest = rest.writes;
    expect(rest).toEqual({ applies: 0, writes: 0 });
    expect(await spokeState()).toEqual({
      scaleToZero: "true",
      example: false,
      maxScale: "5",
      replicas: 2,
      cpu: "2",
    });
    expect(await spokeTwo.get("v1", "ConfigMap", "knative-serving", "config-gc")).toBeUndefined();
    // `knative-fleet status` at the terminal: -o wide's column, and --drift's records with the line to edit.
    const wide = await runCli(
      "status",
      "--kubeconfig",
      sandbox.hub.adminKubeconfig,
      "-n",
      "knative-fleet",
      "-o",
      "wide",
    );
    expect(wide.stdout).toMatch(/spoke-2-serving .*kept: /);
    const detail = await runCli(
      "status",
      "--kubeconfig",
      sandbox.hub.adminKubeconfig,
      "-n",
      "knative-fleet",
      "--drift",
    );
    expect(detail.stdout).toContain(
      "edit spec.config.autoscaler.enable-scale-to-zero in clusters/spoke-2/knative-serving.yaml:18 instead",
    );
    expect(detail.stdout).toContain("kube-controller-manager");
    const readme = await waitUntil("the status file's drift section", async () => {
      const text = await statusReadme();
      return text.includes("## Drift") ? text : undefined;
    });
    // Back to correct mode: what report mode kept is put back, and the suites after this one find spoke-2
    // as the fleet file says.
    await push(
      {
        "clusters/spoke-2/knative-serving.yaml": servingFile(
          "spoke-2",
          '  config:\n    autoscaler:\n      enable-scale-to-zero: "false"\n',
        ),
      },
      "Correct drift on spoke-2 again",
    );
    await service.syncNow();
    await waitUntil(
      "spoke-2 as Git says again",
      async () => {
        const state = await spokeState();
        const gc = await spokeTwo.get("v1", "ConfigMap", "knative-serving", "config-gc");
        return gc && state.scaleToZero === "false" && state.replicas === 1 && state.cpu === "1"
          ? true
          : undefined;
      },
      180_000,
    );
    // The newest record of spoke-2's CR while kept (which of one pass's records is newest is not fixed).
    expect(readme).toMatch(
      /\| fleet-system\/spoke-2 \| KnativeServing knative-fleet\/spoke-2-serving \| [^\n]* \| kept \|/,
    );
  });

  it("an invalid file is reported with file:line in the status, prunes nothing, and others still apply", async () => {
    await pushBrokenBesideGood("  registry:\n    overide:\n      controller: x\n", "30s", "45s");
    const readme = await waitUntil("status shows the validation error", async () => {
      const text = await statusReadme();
      return text.includes("clusters/spoke-2/knative-serving.yaml:") && text.includes("overide")
        ? text
        : undefined;
    });
    expect(readme).toMatch(/clusters\/spoke-2\/knative-serving\.yaml:\d+/);
    // Nothing pruned: spoke-2's Serving CR stays with its last good state.
    expect(await hubCr("KnativeServing", "spoke-2-serving")).toBeDefined();
    expect((await hubCr("KnativeServing", "spoke-1-serving"))?.spec).toMatchObject(gracePeriod("45s"));
  });

  it("a setting the release does not have fails its file like an error (status at file:line), others still apply", async () => {
    await pushBrokenBesideGood(
      '  config:\n    autoscalr:\n      enable-scale-to-zero: "true"\n',
      "45s",
      "50s",
    );
    const readme = await waitUntil("status shows the settings error", async () => {
      const text = await statusReadme();
      return text.includes("spec.config.autoscalr") ? text : undefined;
    });
    expect(readme).toMatch(/clusters\/spoke-2\/knative-serving\.yaml:15:5/);
    expect(readme).toContain("did you mean autoscaler?");
    // spoke-2's CR keeps its last good state (scale to zero off); spoke-1's change is applied.
    const spoke2Cr = await hubCr("KnativeServing", "spoke-2-serving");
    expect(spoke2Cr?.spec).toMatchObject({ config: { autoscaler: { "enable-scale-to-zero": "false" } } });
    expect(spoke2Cr?.spec).not.toHaveProperty("config.autoscalr");
    expect((await hubCr("KnativeServing", "spoke-1-serving"))?.spec).toMatchObject(gracePeriod("50s"));
  });

  it("a git server answering 500 or down: retries, nothing pruned, recovers", async () => {
    git.failNext(50, 500);
    await service.syncNow();
    expect(await hubCr("KnativeServing", "spoke-2-serving")).toBeDefined();
    git.failNext(0);
    await git.stop();
    await service.syncNow();
    expect(await hubCr("KnativeServing", "spoke-1-serving")).toBeDefined();
    await git.start();
  });

  it("a restart mid-sync converges with nothing duplicated", async () => {
    await service.stop();
    const fixed = await push(
      { "clusters/spoke-2/knative-serving.yaml": servingFile("spoke-2") },
      "Fix the typo",
    );
    service = await startService();
    await service.syncNow();
    await waitUntil("spoke-2 CR at the fixed commit", async () => {
      const cr = await hubCr("KnativeServing", "spoke-2-serving");
      return cr?.metadata.annotations?.["fleet.knative.dev/source-commit"] === fixed ? true : undefined;
    });
    const servings = await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: "knative-fleet" });
    expect(servings.items.map((c) => c.metadata.name).sort()).toEqual(["spoke-1-serving", "spoke-2-serving"]);
  });

  it("deleting the file removes Knative from spoke-2, and a person's commit made meanwhile survives", async () => {
    const started = Date.now();
    await push({ "clusters/spoke-2/knative-serving.yaml": null }, "Remove Serving from spoke-2");
    await push({ "docs/notes.md": "spoke-2 serves no more\n" }, "A person's note");
    await service.syncNow();
    await waitUntil(
      "hub CR gone",
      async () => ((await hubCr("KnativeServing", "spoke-2-serving")) ? undefined : true),
      120_000,
    );
    await waitUntil(
      "spoke-2 cleaned",
      async () => {
        const left = await spokeTwo.list("apps/v1", "Deployment", { namespace: "knative-serving" });
        return left.items.length === 0 ? true : undefined;
      },
      120_000,
    );
    figures.removeToCleanMs = Date.now() - started;
    expect(
      await spokeTwo.get("rbac.authorization.k8s.io/v1", "ClusterRole", undefined, "knative-serving-core"),
    ).toBeUndefined();
    // spoke-2's Eventing is untouched.
    expect(isReady(await hubCr("KnativeEventing", "spoke-2-eventing"))).toBe(true);
    await waitUntil("status without spoke-2-serving", async () =>
      !(await statusReadme()).includes("spoke-2-serving") ? true : undefined,
    );
    const subjects = (await git.log(REPO)).map((c) => c.subject);
    expect(subjects).toContain("A person's note");
    expect(subjects).toContain("Remove Serving from spoke-2");
  });
});
