import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";

// The coordination.k8s.io/v1 Lease as the leader election (leader-election.ts) and the shard membership
// (sharding.ts) read and write it: its API version, its shape, its time format and its reads, in one place.

export const LEASE_API_VERSION = "coordination.k8s.io/v1";

/** coordination.k8s.io/v1 LeaseSpec, as client-go's LeaseLock writes it. */
export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

/** A Lease: the leader's (spec only) and a shard member's (labelled, its acknowledged view annotated). */
export interface Lease {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: LeaseSpec;
}

/** ISO 8601 with microseconds: the format of metav1.MicroTime (a Lease's acquireTime and renewTime). */
export const microTime = (at: Date): string => at.toISOString().replace(/Z$/, "000Z");

/** The API path of the Leases in `namespace`, or of the one named `name`. */
export const leasePath = (client: KubeClient, namespace: string, name?: string): Promise<string> =>
  client.path(LEASE_API_VERSION, "Lease", namespace, name);

/** The Lease `namespace/name`; undefined when there is none. */
export async function getLease(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<Lease | undefined> {
  const object = await client.get(LEASE_API_VERSION, "Lease", namespace, name);
  return object && asLease(object);
}

/** The Leases in `namespace` that `labelSelector` selects. */
export async function listLeases(
  client: KubeClient,
  namespace: string,
  labelSelector: string,
): Promise<Lease[]> {
  const list = await client.list(LEASE_API_VERSION, "Lease", { namespace, labelSelector });
  return list.items.map(asLease);
}

/** An object the hub returned for a Lease, read as one (the API server checked its shape). */
const asLease = (object: KubeObject): Lease => object as unknown as Lease;
