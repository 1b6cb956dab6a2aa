import type { ResourceIdentity } from "../fleet/identity.ts";

/**
 * The hub CRs by the cluster they target, kept beside the informers, event by event. Finding a cluster's
 * CRs by listing every CR made a shard's widening quadratic: a replica that gained 330 of 1,000 clusters
 * looked at all 1,000 CRs for each (issue #44: 2.7 s of a loaded replica's event loop, its Leases unrenewed).
 */
export class ClusterIndex {
  /** Each CR's queue key: its identity and the cluster (`clusterLabel`) it targets now. */
  readonly #byKey = new Map<string, { identity: ResourceIdentity; cluster: string }>();
  readonly #keysByCluster = new Map<string, Set<string>>();

  /** A CR as an informer has it now; `cluster` undefined when it is gone from the hub. */
  note(key: string, identity: ResourceIdentity, cluster: string | undefined): void {
    const before = this.#byKey.get(key)?.cluster;
    if (before === cluster) return;
    if (before !== undefined) {
      const keys = this.#keysByCluster.get(before)!;
      keys.delete(key);
      if (keys.size === 0) this.#keysByCluster.delete(before);
    }
    if (cluster === undefined) {
      this.#byKey.delete(key);
      return;
    }
    this.#byKey.set(key, { identity, cluster });
    const keys = this.#keysByCluster.get(cluster);
    if (keys) keys.add(key);
    else this.#keysByCluster.set(cluster, new Set([key]));
  }

  /** The CRs that target the cluster now. */
  crsOf(cluster: string): ResourceIdentity[] {
    return [...(this.#keysByCluster.get(cluster) ?? [])].map((key) => this.#byKey.get(key)!.identity);
  }

  /** The cluster the CR of a queue key targets; undefined when the hub has no such CR. */
  clusterOf(key: string): string | undefined {
    return this.#byKey.get(key)?.cluster;
  }

  /** Every cluster some CR targets. */
  clusters(): Set<string> {
    return new Set(this.#keysByCluster.keys());
  }
}
