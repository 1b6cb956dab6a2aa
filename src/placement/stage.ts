import { formatIdentity, type ResourceIdentity } from "../fleet/identity.ts";
import type { FleetModel } from "../fleet/model.ts";
import type { KubeClient } from "../kube/client.ts";
import { Informer, type InformerEvent } from "../kube/informer.ts";
import type { KubeObject } from "../kube/object.ts";
import type { Logger } from "../observability/log.ts";
import { withPlacements } from "./combine.ts";
import { type Departure, type DepartureInput, type DepartureResult, decideDepartures } from "./departures.ts";
import { type ExpandOptions, expandPlacements, type PlacementSelection } from "./expand.ts";
import {
  type Inventory,
  inventoryClusterOf,
  inventoryDecisionOf,
  PLACEMENT_DECISION_API_VERSION,
} from "./inventory.ts";

/** What the placements did in one sync, for the status rollup. */
export interface PlacementReport {
  selections: PlacementSelection[];
  /** Clusters out of their placement and waiting for the grace period (or a prune safeguard). */
  departures: Departure[];
}

export interface PreparedSync {
  /** The fleet model with every placement's CRs in it. */
  model: FleetModel;
  /** For the mirror: the hub CRs to keep although no file declares them. */
  hold(live: readonly KubeObject[]): ResourceIdentity[];
  /** Valid once the mirror has called `hold`. */
  report(): PlacementReport;
}

export interface PlacementStageOptions {
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

  /** Expands the model's placements for one sync of `repository`. */
  prepare(model: FleetModel, repository: string): PreparedSync {
    const options: ExpandOptions = this.#options.allowedNamespaces
      ? { allowedNamespaces: this.#options.allowedNamespaces }
      : {};
    const sync = expandForSync(model, this.inventory(), options);
    let departures: Departure[] = [];
    return {
      model: sync.model,
      hold: (live) => {
        const now = this.#now();
        const result = sync.departures({
          live,
          repository,
          now,
          gracePeriodMs: this.#options.departureGracePeriodMs,
          previous: this.#departedSince,
        });
        this.#departedSince = result.since;
        departures = result.departures;
        this.#scheduleDue(result.nextDue, now);
        return result.held;
      },
      report: () => ({ selections: sync.selections, departures }),
    };
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

/** One sync's placements, expanded: the pure part of `PlacementStage.prepare`. */
export interface PlacementSync {
  /** The fleet model with every placement's CRs in it. */
  model: FleetModel;
  selections: PlacementSelection[];
  /** Which live CRs of clusters out of their placement are kept, given the clock and the last departures. */
  departures(
    input: Pick<DepartureInput, "live" | "repository" | "now" | "gracePeriodMs" | "previous">,
  ): DepartureResult;
}

export function expandForSync(
  model: FleetModel,
  inventory: Inventory,
  options: ExpandOptions,
): PlacementSync {
  const expansion = expandPlacements(model.placements, inventory, options);
  const combined = withPlacements(model, expansion);
  const declared = new Set(combined.files.flatMap((file) => file.declares).map(formatIdentity));
  return {
    model: combined,
    selections: expansion.selections,
    departures: (input) =>
      decideDepartures({
        ...input,
        desired: declared,
        placements: new Set(expansion.selections.map(formatIdentity)),
        pendingPlacements: new Set(
          expansion.selections.filter((s) => s.pending !== undefined).map(formatIdentity),
        ),
        failedPaths: new Set(combined.files.filter((f) => f.status === "failed").map((f) => f.path)),
      }),
  };
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
