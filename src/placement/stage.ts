import type { KubeClient } from "../kube/client.ts";
import { Informer, type InformerEvent } from "../kube/informer.ts";
import type { KubeObject } from "../kube/object.ts";
import type { Logger } from "../observability/log.ts";
import type { PlacementSync } from "./combine.ts";
import type { DepartureResult } from "./departures.ts";
import {
  type Inventory,
  inventoryClusterOf,
  inventoryDecisionOf,
  PLACEMENT_DECISION_API_VERSION,
} from "./inventory.ts";

interface PlacementStageOptions {
  hub: KubeClient;
  /** The namespaces whose ClusterProfiles and PlacementDecisions are read; every namespace when undefined. */
  allowedNamespaces?: readonly string[];
  /** The ClusterProfile version the hub stores (v1alpha1 or v1alpha2; access/clusterprofile-version.ts). */
  clusterProfileApiVersion: string;
  /** How long a cluster may be out of a placement before its CR is pruned. */
  departureGracePeriodMs: number;
  log: Logger;
  /** The inventory changed what a placement may select, or a departure is due: sync the last commit again. */
  onChange(): void;
  now?(): number;
}

/** Coalesces a burst of inventory events (a cluster manager relisting) into one re-expansion. */
const CHANGE_DEBOUNCE_MS = 200;

/**
 * The placement stage of the service: watches the hub's ClusterProfiles and PlacementDecisions (list +
 * watch, never a poll), asks for a sync when something selection reads changes, and expands the placements
 * of each sync against what it has seen. Status-only changes of a ClusterProfile (conditions, heartbeats)
 * are not selection changes and cost nothing.
 */
export class PlacementStage {
  readonly #options: PlacementStageOptions;
  readonly #profiles: Informer[];
  readonly #decisions: Informer[];
  readonly #synced = new Set<Informer>();
  readonly #errors = new Map<Informer, string>();
  #departedSince = new Map<string, number>();
  #changeTimer: NodeJS.Timeout | undefined;
  #dueTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: PlacementStageOptions) {
    this.#options = options;
    const scopes = options.allowedNamespaces ?? [undefined];
    const informer = (apiVersion: string, kind: string, namespace: string | undefined) => {
      const watch: Informer = new Informer(
        options.hub,
        apiVersion,
        kind,
        (err) => {
          const message = err instanceof Error ? err.message : String(err);
          if (this.#errors.get(watch) !== message) {
            options.log.warn({ kind, namespace, err: message }, "placement inventory watch failed; retrying");
          }
          this.#errors.set(watch, message);
        },
        namespace,
      );
      watch.on((event, object, previous) => {
        if (this.#synced.has(watch) && selectionChanged(kind, event, object, previous)) this.#changed();
      });
      return watch;
    };
    this.#profiles = scopes.map((ns) => informer(options.clusterProfileApiVersion, "ClusterProfile", ns));
    this.#decisions = scopes.map((ns) => informer(PLACEMENT_DECISION_API_VERSION, "PlacementDecision", ns));
  }

  /** Starts the watches; each that lists for the first time asks for a sync (its placements were pending). */
  start(): void {
    for (const watch of [...this.#profiles, ...this.#decisions]) {
      watch.start();
      void watch.hasSynced().then(() => {
        this.#synced.add(watch);
        this.#errors.delete(watch);
        this.#changed();
      });
    }
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#changeTimer);
    clearTimeout(this.#dueTimer);
    for (const watch of [...this.#profiles, ...this.#decisions]) watch.stop();
  }

  /** What selection reads now; a list not yet synced is unknown. */
  inventory(): Inventory {
    const all = (watches: Informer[]) =>
      watches.every((watch) => this.#synced.has(watch))
        ? watches.flatMap((watch) => watch.list())
        : undefined;
    const profiles = all(this.#profiles);
    const decisions = all(this.#decisions);
    const errors = [...new Set(this.#errors.values())];
    return {
      clusters: profiles?.flatMap((object) => inventoryClusterOf(object) ?? []),
      decisions: decisions?.flatMap((object) => inventoryDecisionOf(object) ?? []),
      ...(errors.length > 0 ? { unknownReason: errors.join("; ") } : {}),
    };
  }

  /**
   * Which CRs of clusters that left their placement this sync keeps, by the departure clock this stage
   * holds across syncs; the sync that prunes a departure once its grace period ends is scheduled here.
   */
  hold(sync: PlacementSync, live: readonly KubeObject[], repository: string): DepartureResult {
    const now = this.#now();
    const result = sync.departures({
      live,
      repository,
      now,
      gracePeriodMs: this.#options.departureGracePeriodMs,
      previous: this.#departedSince,
    });
    this.#departedSince = result.since;
    this.#scheduleDue(result.nextDue, now);
    return result;
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  #changed(): void {
    if (this.#stopped || this.#changeTimer) return;
    this.#changeTimer = setTimeout(() => {
      this.#changeTimer = undefined;
      if (!this.#stopped) this.#options.onChange();
    }, CHANGE_DEBOUNCE_MS);
    this.#changeTimer.unref();
  }

  /** A departure whose grace period ends must be pruned then, even if nothing else happens. */
  #scheduleDue(due: number | undefined, now: number): void {
    clearTimeout(this.#dueTimer);
    this.#dueTimer = undefined;
    if (due === undefined || this.#stopped) return;
    this.#dueTimer = setTimeout(() => this.#changed(), Math.max(0, due - now) + 50);
    this.#dueTimer.unref();
  }
}

/** Whether an event changes what selection reads: existence, labels, properties, or any decision. */
function selectionChanged(
  kind: string,
  event: InformerEvent,
  object: KubeObject,
  previous: KubeObject | undefined,
): boolean {
  if (kind !== "ClusterProfile" || event !== "MODIFIED" || previous === undefined) return true;
  const before = inventoryClusterOf(previous);
  const after = inventoryClusterOf(object);
  return JSON.stringify(comparable(before)) !== JSON.stringify(comparable(after));
}

function comparable(cluster: ReturnType<typeof inventoryClusterOf>): unknown {
  if (cluster === undefined) return null;
  return [cluster.labels, [...cluster.properties]];
}
