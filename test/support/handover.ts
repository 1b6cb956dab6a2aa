import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AccessPolicySchema } from "../../src/access/policy.ts";
import { type LocationPolicy, LocationPolicySchema } from "../../src/admission/locations.ts";
import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { loadKubeConfig } from "../../src/kube/kubeconfig.ts";
import { type KubeObject, nameOf } from "../../src/kube/object.ts";
import { createLogger, silentLogger } from "../../src/observability/log.ts";
import type { ReconcileReport } from "../../src/reconcile/controller.ts";
import { type Engine, startEngine } from "../../src/reconcile/engine.ts";
import type { Sandbox } from "../sandbox/index.ts";
import { knativeReleasesDir } from "./shared.ts";
import { UpstreamOperator } from "./upstream-operator.ts";
import { waitUntil } from "./wait.ts";

/** The two reconcilers a hand-over passes a CR between, started and stopped the same way. */

/** knative-fleet's reconcile engine in this process, recording every reconcile it reports. */
export async function startFleet(
  sandbox: Sandbox,
  options: {
    providerFile: string | undefined;
    manifestLocations?: Partial<LocationPolicy>;
    /** More ClusterProfile namespaces to read, each with its credentials namespace (as the binding asks). */
    credentialNamespaces?: Record<string, string>;
  } = {
    providerFile: sandbox.providerFile,
  },
): Promise<{ engine: Engine; reports: ReconcileReport[] }> {
  const more = options.credentialNamespaces ?? {};
  const reports: ReconcileReport[] = [];
  const engine = await startEngine({
    hub: loadKubeConfig(sandbox.hub.adminKubeconfig),
    providerFile: options.providerFile,
    kodataDir: knativeReleasesDir(),
    manifestLocations: LocationPolicySchema.parse(options.manifestLocations ?? {}),
    hubInstall: true, // engine/install.test.ts installs on the hub itself too
    allowedClusterProfileNamespaces: [sandbox.clusterProfileNamespace, ...Object.keys(more)],
    ...(Object.keys(more).length > 0 && {
      accessPolicy: AccessPolicySchema.parse({
        credentialNamespaces: { [sandbox.clusterProfileNamespace]: sandbox.clusterProfileNamespace, ...more },
      }),
    }),
    pollIntervalMs: 1_000,
    resyncIntervalMs: 3_600_000,
    workers: 4,
    applyConcurrency: 8,
    log: process.env.ENGINE_LOG ? createLogger(process.env.ENGINE_LOG) : silentLogger,
    onReconciled: (r) => reports.push(r),
  });
  return { engine, reports };
}

/**
 * The upstream operator against the sandbox hub, polling spokes every second (or `pollInterval`), its log in
 * a temp dir.
 */
export async function startUpstream(
  sandbox: Sandbox,
  options: { providerFile?: string | undefined; pollInterval?: string } = {
    providerFile: sandbox.providerFile,
  },
): Promise<UpstreamOperator> {
  const upstream = new UpstreamOperator({
    kubeconfig: sandbox.hub.adminKubeconfig,
    providerFile: options.providerFile,
    logFile: join(mkdtempSync(join(tmpdir(), "upstream-operator-")), "operator.log"),
    pollInterval: options.pollInterval ?? "1s",
  });
  await upstream.waitStarted();
  return upstream;
}

/** The first report after `since` in which the CR is Ready (the reconciler's own view, not a stale status). */
export function waitFleetReady(
  reports: readonly ReconcileReport[],
  kind: string,
  namespace: string,
  name: string,
  timeoutMs = 180_000,
): Promise<ReconcileReport> {
  return waitUntil(
    `knative-fleet to report ${kind} ${namespace}/${name} Ready`,
    async () =>
      reports.find((r) => r.kind === kind && r.namespace === namespace && r.name === name && r.ready),
    timeoutMs,
  );
}

/** Deletes hub CRs and waits until their finalizers let them go (whichever reconciler runs does the cleanup). */
export async function deleteCrs(hub: KubeClient, crs: readonly KubeObject[], timeoutMs = 120_000) {
  for (const cr of crs) {
    await hub.delete(OPERATOR_API_VERSION, cr.kind, cr.metadata.namespace, nameOf(cr)).catch(() => {});
  }
  for (const cr of crs) {
    await waitUntil(
      `${cr.kind} ${cr.metadata.namespace}/${cr.metadata.name} gone from the hub`,
      async () =>
        (await hub.get(OPERATOR_API_VERSION, cr.kind, cr.metadata.namespace, nameOf(cr))) ? undefined : true,
      timeoutMs,
    );
  }
}

/** Removes finalizers and deletes, for CRs no reconciler will finalize (failure cases). */
export async function forceDeleteCrs(hub: KubeClient, crs: readonly KubeObject[]) {
  for (const cr of crs) {
    const { kind, metadata } = cr;
    await hub
      .mergePatch(OPERATOR_API_VERSION, kind, metadata.namespace, metadata.name ?? "", {
        metadata: { finalizers: null },
      })
      .catch(() => {});
    await hub.delete(OPERATOR_API_VERSION, kind, metadata.namespace, metadata.name ?? "").catch(() => {});
  }
}

/** Every anchor of `kind`'s CR `name` on a spoke, as `namespace` names: one install means one entry. */
export async function anchorNamespaces(spoke: KubeClient, kind: string, name: string): Promise<string[]> {
  const anchor = `${kind.toLowerCase()}-${name}-root-owner`;
  const configMaps = await spoke.list("v1", "ConfigMap", {});
  return configMaps.items.filter((c) => c.metadata.name === anchor).map((c) => c.metadata.namespace ?? "");
}

/** Serving with Kourier, its ingress class named as upstream needs it. */
export const KOURIER = {
  ingress: { kourier: { enabled: true } },
  config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" } },
};

/** A hub CR (named `serving` / `eventing` after its kind) in `namespace`, for the sandbox spoke `spoke`. */
export function hubCr(
  sandbox: Sandbox,
  kind: "KnativeServing" | "KnativeEventing",
  namespace: string,
  spoke: string,
  spec: Record<string, unknown>,
): KubeObject {
  return {
    apiVersion: OPERATOR_API_VERSION,
    kind,
    metadata: { name: kind === "KnativeServing" ? "serving" : "eventing", namespace },
    spec: { ...spec, clusterProfileRef: { name: spoke, namespace: sandbox.clusterProfileNamespace } },
  };
}
