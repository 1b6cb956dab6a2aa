import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  PRUNE_CONFIRMATION_CONFIGMAP,
  ROLLOUT_KEY_MARK_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../../src/api/labels.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import { nameOf } from "../../../src/kube/object.ts";
import { decideApplies } from "../../../src/mirror/decide.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { RolloutStage } from "../../../src/rollout/stage.ts";
import { ROLLOUT_KEY_SECRET, ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { LeaderElector } from "../../../src/service/leader-election.ts";
import { loadShardKey, SHARD_KEY_SECRET } from "../../../src/service/shard-key.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { crFile, rolloutText, TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { forceDeleteCrs } from "../../support/handover.ts";
import { type KubeObject, only, renderChart } from "../../support/helm.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { syncInto } from "../../support/sync.ts";
import { waitUntil } from "../../support/wait.ts";

// The leader elector and the event recorder as the chart's ServiceAccount, with exactly the RBAC the chart
// renders for two replicas: the Lease (create; get and update by name) and Events (create and patch, no
// get or list) are all they need.

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const suffix = Date.now().toString(36);
const namespace = `service-rbac-${suffix}`;
const release = `svc-${suffix}`;
const credentials = `service-rbac-creds-${suffix}`;
const rendered = renderChart({
  values: { replicas: 2, multicluster: { credentials: { namespace: credentials } } },
  release,
  namespace,
});
const RBAC_KINDS = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"];
const rbac = rendered.filter((o) => RBAC_KINDS.includes(o.kind));
const config = parse(
  (only(rendered, "ConfigMap", `${release}-knative-fleet`) as KubeObject & { data: Record<string, string> })
    .data["config.yaml"]!,
) as {
  leaderElection: { enabled: boolean; leaseName: string; namespace: string };
  rollout: { keyNamespace: string };
};
const workDir = mkdtempSync(join(tmpdir(), "knative-fleet-rbac-"));
const ROLLOUT_POLICY = rolloutText(
  { waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }] },
  { name: "knative" },
);
let serviceAccount: KubeClient;

beforeAll(async () => {
  await ensureNamespace(hub, namespace);
  await ensureNamespace(hub, credentials);
  await ensureNamespace(hub, config.rollout.keyNamespace); // the chart's own Namespace object, in effect
  for (const object of rbac) await hub.apply(object);
  serviceAccount = await serviceAccountClient(nameOf(only(rendered, "ServiceAccount")));
});

afterAll(async () => {
  for (const o of rbac.filter((o) => !o.metadata.namespace))
    await hub.delete(o.apiVersion, o.kind, undefined, nameOf(o));
  // The CRs this file mirrored go first and the namespaces are waited out: the sandbox is shared, and a
  // later file's upstream operator (which watches the whole hub) must not find them half-deleted.
  const { items } = await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace });
  await forceDeleteCrs(hub, items);
  const gone = [namespace, credentials, config.rollout.keyNamespace];
  for (const name of gone) await hub.delete("v1", "Namespace", undefined, name);
  for (const name of gone)
    await waitUntil(
      `namespace ${name} gone`,
      async () => ((await hub.get("v1", "Namespace", undefined, name)) ? undefined : true),
      120_000,
    );
  rmSync(workDir, { recursive: true, force: true });
});

/** The product's client, authenticated with a bound token of the ServiceAccount (TokenRequest). */
async function serviceAccountClient(name: string): Promise<KubeClient> {
  const { body } = await hub.rest.request<{ status: { token: string } }>({
    method: "POST",
    path: `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
    body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenRequest", spec: { expirationSeconds: 3600 } },
  });
  const file = join(workDir, "kubeconfig");
  writeFileSync(
    file,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "hub", cluster: { server: sandbox.hub.server, "certificate-authority": sandbox.hub.caFile } },
      ],
      users: [{ name: name, user: { token: body.status.token } }],
      contexts: [{ name: "sa", context: { cluster: "hub", user: name } }],
      "current-context": "sa",
    }),
  );
  return clientFromKubeConfig(loadKubeConfig(file));
}

describe("the chart's RBAC", () => {
  it("lets the ServiceAccount create, renew and release the chart's Lease", async () => {
    expect(config.leaderElection).toMatchObject({ enabled: true, namespace });
    const { leaseName } = config.leaderElection;
    const elector = new LeaderElector({
      client: serviceAccount,
      namespace,
      name: leaseName,
      identity: "pod-a",
      log: silentLogger,
      retryPeriodMs: 200,
      renewDeadlineMs: 1_000,
      leaseDurationMs: 2_000,
      onStartedLeading() {},
      onStoppedLeading() {},
    });
    elector.start();
    await waitUntil("pod-a leads", async () => (elector.isLeader ? true : undefined));
    const leaseSpec = async () =>
      (await hub.get("coordination.k8s.io/v1", "Lease", namespace, leaseName))?.spec as
        | { holderIdentity: string; renewTime: string; leaseDurationSeconds: number }
        | undefined;
    const renewTime = async () => (await leaseSpec())?.renewTime ?? "";
    const first = await renewTime();
    await waitUntil("a renewal", async () => ((await renewTime()) > first ? true : undefined), 5_000);
    expect(elector.isLeader).toBe(true);
    await elector.stop();
    expect(await leaseSpec()).toMatchObject({ holderIdentity: "", leaseDurationSeconds: 1 });
  });

  it("lets the ServiceAccount make and read the shard key, once, whichever replica comes first", async () => {
    const { keyNamespace } = config.rollout;
    await hub.delete("v1", "Secret", keyNamespace, SHARD_KEY_SECRET).catch(() => undefined);
    // Three replicas starting at once: one key, the same bytes for all.
    const keys = await Promise.all(
      [1, 2, 3].map(() => loadShardKey(serviceAccount, keyNamespace, silentLogger)),
    );
    expect(new Set(keys.map((k) => Buffer.from(k).toString("hex"))).size).toBe(1);
    // A key Secret someone made beforehand (the same name, another uid) is refused, naming how to adopt it.
    await hub.delete("v1", "Secret", keyNamespace, SHARD_KEY_SECRET);
    await hub.apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: SHARD_KEY_SECRET, namespace: keyNamespace },
      data: { key: Buffer.alloc(32, 7).toString("base64") },
    });
    await expect(loadShardKey(serviceAccount, keyNamespace, silentLogger)).rejects.toThrow(
      /was not made by knative-fleet.*adopt-shard-key/,
    );
    await hub.delete("v1", "Secret", keyNamespace, SHARD_KEY_SECRET);
  });

  it("lets the ServiceAccount record and count Events on an object in another namespace", async () => {
    const other = `${namespace}-crs`;
    await ensureNamespace(hub, other);
    try {
      const target = await hub.apply({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "cr", namespace: other },
      });
      const involved = { apiVersion: "v1", kind: "ConfigMap", metadata: target.metadata as { name: string } };
      const recorder = new EventRecorder({
        client: serviceAccount,
        component: "knative-fleet",
        log: silentLogger,
      });
      await recorder.record(involved, "Warning", "ReconcileFailed", "spoke unreachable");
      await recorder.record(involved, "Warning", "ReconcileFailed", "spoke unreachable");
      // Nothing but create and patch: the counting state is the recorder's own, not read back.
      await expect(serviceAccount.list("v1", "Event", { namespace: other })).rejects.toMatchObject({
        status: 403,
      });
      const { items } = await hub.list("v1", "Event", { namespace: other });
      expect(items).toHaveLength(1);
      expect(items[0]).toMatchObject({ reason: "ReconcileFailed", count: 2 });
    } finally {
      await hub.delete("v1", "Namespace", undefined, other);
    }
  });

  it("lets the ServiceAccount keep the rollout's sealed state and its key, and record a held prune", async () => {
    const fleetNamespace = only(rendered, "Role", `${release}-knative-fleet-prune-confirmation`).metadata
      .namespace!;
    await installFleetCrds(hub);
    const crs = { apiVersion: OPERATOR_API_VERSION, kind: "KnativeServing" };
    const { keyNamespace } = config.rollout;
    expect(keyNamespace).toBe(`${release}-knative-fleet-rollout-key`);
    const stage = new RolloutStage({
      hub: serviceAccount,
      namespace: fleetNamespace,
      keyNamespace,
      source: { repository: TEST_REPOSITORY, branch: "main" },
      inventory: () => [{ namespace: "fleet-system", name: "c1", labels: {}, properties: new Map() }],
      modelAt: (commit) => Promise.reject(new Error(`no commit ${commit}`)),
      events: new EventRecorder({ client: serviceAccount, component: "knative-fleet", log: silentLogger }),
      log: silentLogger,
      checkIntervalMs: 60_000,
      onDue: () => {},
    });
    const model = buildFleetModel(
      [
        crFile({ name: "c1-serving", cluster: "c1", namespace: fleetNamespace }),
        { path: "rollout.yaml", text: ROLLOUT_POLICY },
      ],
      { defaultNamespace: fleetNamespace },
    );
    const steps = decideApplies(
      model.resources,
      { repository: TEST_REPOSITORY, branch: "main", commit: "a1" },
      [],
    );
    const gated = await stage.gate(await stage.open(model, "a1"), steps, [], []);
    stage.stop();
    expect(gated.steps.map((step) => [step.action, step.reason])).toEqual([["create", undefined]]);
    const sealed = await hub.get("v1", "ConfigMap", fleetNamespace, ROLLOUT_STATE_CONFIGMAP);
    expect(Object.keys((sealed?.data as object) ?? {}).sort()).toEqual(["mac", "previous", "state"]);
    // The key, made (a server-side apply the Role allows by name) and marked in its own namespace, and the
    // record of the last state stored (patched by the ServiceAccount after the state).
    const key = await hub.get("v1", "Secret", keyNamespace, ROLLOUT_KEY_SECRET);
    expect(Object.keys((key?.data as object) ?? {}).sort()).toEqual(["key", "last"]);
    expect(key?.metadata.annotations?.[ROLLOUT_KEY_MARK_ANNOTATION]).toBe(key?.metadata.uid);
    expect(await hub.get("v1", "Secret", fleetNamespace, ROLLOUT_KEY_SECRET)).toBeUndefined();
    // No other Secret, no Secret at all beside the state, and no other ConfigMap, of the namespaces.
    for (const where of [fleetNamespace, keyNamespace]) {
      await expect(serviceAccount.list("v1", "Secret", { namespace: where })).rejects.toMatchObject({
        status: 403,
      });
    }
    await expect(
      serviceAccount.get("v1", "Secret", fleetNamespace, ROLLOUT_KEY_SECRET),
    ).rejects.toMatchObject({ status: 403 });
    await expect(serviceAccount.get("v1", "ConfigMap", fleetNamespace, "other")).rejects.toMatchObject({
      status: 403,
    });
    // The held prune's record on the prune-confirmation ConfigMap, through the mirror's own write.
    await hub.apply({
      ...crs,
      metadata: {
        name: "gone",
        namespace: fleetNamespace,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
        annotations: { [SOURCE_REPOSITORY_ANNOTATION]: TEST_REPOSITORY },
      },
      spec: {},
    });
    const held = await syncInto(serviceAccount, {
      files: [crFile({ name: "kept", cluster: "c1", namespace: fleetNamespace })],
      namespace: fleetNamespace,
      commit: "a2",
      repository: TEST_REPOSITORY,
      prune: { maxPruneFraction: 0 },
    });
    expect(held.prune.state).toBe("held");
    const record = (await hub.get("v1", "ConfigMap", fleetNamespace, PRUNE_CONFIRMATION_CONFIGMAP))!;
    expect(JSON.parse((record.data as Record<string, string>).held!)).toMatchObject({
      candidates: [`KnativeServing ${fleetNamespace}/gone`],
    });
  });
});
