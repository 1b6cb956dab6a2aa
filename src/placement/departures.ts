import {
  PLACEMENT_KIND_LABEL,
  PLACEMENT_LABEL,
  SOURCE_CLUSTER_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../api/labels.ts";
import { formatIdentity, identityOf, type ObjectIdentity, type ResourceIdentity } from "../fleet/identity.ts";
import { PLACEMENT_KINDS } from "../fleet/placement-schema.ts";
import type { KubeObject } from "../kube/object.ts";

// A cluster that leaves a placement keeps its CR for a grace period, and is pruned (behind the mirror's
// usual safeguards) only when it has stayed out that long. Whatever made it leave: a ClusterProfile deleted
// and recreated by a restarting cluster manager, a label that flaps, a PlacementDecision rewritten in two
// steps. A departure shorter than the grace period changes nothing on the spoke, and flapping faster than
// it never reinstalls; slower flapping costs one uninstall and install per grace period at most. A
// ClusterProfile that is only unhealthy never leaves: health is not read by selection at all.

/** How long a departed cluster keeps its CR unless the service's config says otherwise. */
export const DEFAULT_DEPARTURE_GRACE_PERIOD = "5m";

export interface Departure extends ResourceIdentity {
  /** The placement's identity (`KnativeServingPlacement namespace/name`), as its CR's labels say. */
  placement: string;
  cluster: string;
  /** When it was first seen out of the selection (ms since the epoch). */
  since: number;
  /** When it is pruned if it does not come back. */
  pruneAt: number;
}

export interface DepartureInput {
  /** Every KnativeServing/KnativeEventing on the hub. */
  live: readonly KubeObject[];
  /** The fleet repository: only its CRs are considered. */
  repository: string;
  /**
   * The identities (formatIdentity) of the CRs the fleet declares now: those it wants, and those of clusters a
   * placement selects but cannot make a CR for now (a conflict, an override that breaks the spec). A
   * cluster still selected has not left, whatever is wrong with its CR.
   */
  desired: ReadonlySet<string>;
  /** The identities of the placements Git declares now, valid or pending. */
  placements: ReadonlySet<string>;
  /** Placements not expanded now (the hub could not tell what they select): every CR of theirs is kept. */
  pendingPlacements: ReadonlySet<string>;
  /**
   * Fleet files that failed: a CR whose source path is one of them is kept, with no clock running. A
   * placement file that cannot be read says nothing about what it selects, as a pending one does not.
   */
  failedPaths: ReadonlySet<string>;
  now: number;
  gracePeriodMs: number;
  /**
   * When each departed CR was first seen out, from the previous sync (due ones included, while their CR is
   * on the hub); entries no longer out are dropped.
   */
  previous: ReadonlyMap<string, number>;
}

export interface DepartureResult {
  /** The CRs kept this sync although no file declares them. */
  held: ResourceIdentity[];
  /** The departures within their grace period, for the status. */
  departures: Departure[];
  /** The state for the next sync. */
  since: Map<string, number>;
  /** The earliest time a held departure is due: the sync to run then. */
  nextDue?: number;
}

/** The placement a hub CR came from, by its labels; undefined for a CR from a per-cluster file. */
export function placementOf(object: KubeObject): ObjectIdentity | undefined {
  const labels = object.metadata.labels ?? {};
  const name = labels[PLACEMENT_LABEL];
  // The label holds the kind in lower case, as a label value must be.
  const kind = Object.keys(PLACEMENT_KINDS).find((k) => k.toLowerCase() === labels[PLACEMENT_KIND_LABEL]);
  if (name === undefined || kind === undefined) return undefined;
  return { kind, namespace: object.metadata.namespace ?? "", name };
}

export function decideDepartures(input: DepartureInput): DepartureResult {
  const held: ResourceIdentity[] = [];
  const departures: Departure[] = [];
  const since = new Map<string, number>();
  let nextDue: number | undefined;
  for (const object of input.live) {
    const from = placementOf(object);
    if (from === undefined || object.metadata.deletionTimestamp) continue;
    if (object.metadata.annotations?.[SOURCE_REPOSITORY_ANNOTATION] !== input.repository) continue;
    const placement = formatIdentity(from);
    const cr = identityOf(object);
    const key = formatIdentity(cr);
    if (input.desired.has(key)) continue;
    const unreadable = input.failedPaths.has(object.metadata.annotations?.[SOURCE_PATH_ANNOTATION] ?? "");
    // A placement deleted from Git is a deliberate change: its CRs go like a removed file's.
    if (!unreadable && !input.placements.has(placement)) continue;
    if (unreadable || input.pendingPlacements.has(placement)) {
      held.push(cr);
      continue;
    }
    const leftAt = input.previous.get(key) ?? input.now;
    const pruneAt = leftAt + input.gracePeriodMs;
    // The clock is kept past its end too: a due prune that a safeguard holds (one waiting for a person's
    // confirmation) stays due on the next sync instead of starting a new grace period.
    since.set(key, leftAt);
    if (input.now >= pruneAt) continue;
    held.push(cr);
    const cluster = object.metadata.annotations?.[SOURCE_CLUSTER_ANNOTATION] ?? "";
    departures.push({ ...cr, placement, cluster, since: leftAt, pruneAt });
    nextDue = nextDue === undefined ? pruneAt : Math.min(nextDue, pruneAt);
  }
  return { held, departures, since, nextDue };
}
