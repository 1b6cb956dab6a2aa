import type { Logger } from "pino";
import { ClusterProfileSchema, CONTROL_PLANE_HEALTHY } from "../api/clusterprofile.ts";
import type { TargetClusterReason } from "../api/conditions.ts";
import { clusterKey } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import { type KubeObject, nameOf } from "../kube/object.ts";
import { ClusterAccess } from "./cluster-access.ts";
import { clusterProfileResource } from "./clusterprofile-version.ts";
import { AccessError } from "./errors.ts";
import { type AccessPolicy, SAFE_ACCESS_POLICY } from "./policy.ts";
import type { ProviderConfigState } from "./provider-config.ts";
import { spokeEndpoint } from "./spoke-endpoint.ts";

/** One ClusterProfile as `knative-fleet clusters` reports it. */
export interface ClusterReport {
  namespace: string;
  name: string;
  /** The ControlPlaneHealthy condition's status; Unknown when the cluster manager has not set it. */
  healthy: "True" | "False" | "Unknown";
  /** The access provider chosen for it, when one matches. */
  provider: string | undefined;
  server: string | undefined;
  /** Read live from the spoke's /version. */
  kubernetesVersion: string | undefined;
  /** A GET /version on the client's warm connection, in milliseconds. */
  roundTripMs: number | undefined;
  reachable: boolean;
  /** Why it cannot be reached (a TargetClusterResolved reason) and what to do about it. */
  reason: TargetClusterReason | undefined;
  message: string | undefined;
}

interface SurveyOptions {
  hub: KubeClient;
  providers: ProviderConfigState;
  /** Only ClusterProfiles in this namespace (-n). */
  namespace?: string;
  /** Only the ClusterProfiles of these names; all when empty or unset. */
  names?: readonly string[];
  /** The namespaces the reconcile may target (listed when no namespace is given); all when unset. */
  allowedNamespaces?: readonly string[];
  policy?: AccessPolicy;
  probeTimeoutMs?: number;
  logger?: Logger;
}

const PARALLEL_PROBES = 8;
const DEFAULT_PROBE_TIMEOUT_MS = 10_000;

/**
 * Lists the hub's ClusterProfiles and tries each one the way the reconciler would: resolve (plugin, first
 * request), then one more GET /version on the ready client to measure the round trip. Sorted by namespace and
 * name. Throws when the hub cannot list ClusterProfiles.
 */
export async function surveyClusters(options: SurveyOptions): Promise<ClusterReport[]> {
  const { hub, providers, namespace } = options;
  const probeTimeoutMs = options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const { group, version } = await clusterProfileResource(hub);
  const scopes = namespace !== undefined ? [namespace] : options.allowedNamespaces;
  const lists = await Promise.all(
    (scopes ?? [undefined]).map((ns) => hub.list(`${group}/${version}`, "ClusterProfile", { namespace: ns })),
  );
  const named = (object: KubeObject) => !options.names?.length || options.names.includes(nameOf(object));
  const objects = lists
    .flatMap((list) => list.items)
    .filter(named)
    .sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));

  const access = new ClusterAccess({
    hub,
    providers,
    probeTimeoutMs,
    logger: options.logger,
    namespaces: options.allowedNamespaces,
    policy: options.policy,
  });
  try {
    const reports: ClusterReport[] = new Array(objects.length);
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < objects.length; i = next++) {
        reports[i] = await survey(access, objects[i]!, options, probeTimeoutMs);
      }
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_PROBES, objects.length) }, worker));
    return reports;
  } finally {
    await access.close();
  }
}

async function survey(
  access: ClusterAccess,
  object: object,
  { providers, policy }: SurveyOptions,
  probeTimeoutMs: number,
): Promise<ClusterReport> {
  const metadata = (object as { metadata?: { namespace?: string; name?: string } }).metadata;
  const ref = { namespace: metadata?.namespace ?? "", name: metadata?.name ?? "" };
  const report: ClusterReport = {
    ...ref,
    healthy: "Unknown",
    provider: undefined,
    server: undefined,
    kubernetesVersion: undefined,
    roundTripMs: undefined,
    reachable: false,
    reason: undefined,
    message: undefined,
  };
  const parsed = ClusterProfileSchema.safeParse(object);
  if (parsed.success) {
    const condition = parsed.data.status?.conditions?.find((c) => c.type === CONTROL_PLANE_HEALTHY);
    report.healthy = condition?.status ?? "Unknown";
    // Shown even when the cluster cannot be reached: the server is often the clue.
    if (providers.enabled) {
      try {
        // Shown for any ClusterProfile; whether its credential may be used is resolve()'s to say.
        const endpoint = spokeEndpoint(parsed.data, providers.config, {
          policy: policy ?? SAFE_ACCESS_POLICY,
          namespaces: [ref.namespace],
        });
        report.provider = endpoint.providerName;
        report.server = endpoint.server;
      } catch {
        // resolve() below reports the same problem as the reason
      }
    }
  }
  const resolved = await access.resolve(ref);
  if (!resolved.ok) return { ...report, reason: resolved.reason, message: resolved.message };
  try {
    const probe = await resolved.spoke.connection.probe(probeTimeoutMs);
    return {
      ...report,
      kubernetesVersion: probe.kubernetesVersion,
      roundTripMs: probe.elapsedMs,
      reachable: true,
    };
  } catch (err) {
    if (!(err instanceof AccessError)) throw err;
    return { ...report, reason: err.reason, message: err.message };
  }
}

function keyOf(object: object): string {
  const metadata = (object as { metadata?: { namespace?: string; name?: string } }).metadata;
  return clusterKey({ namespace: metadata?.namespace ?? "", name: metadata?.name ?? "" });
}
