import { canonicalJson } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { fleetFileContent } from "../fleet/file-text.ts";
import { clusterLabel, formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import type { DesiredResource, FleetFile } from "../fleet/model.ts";
import type { PruneReport } from "../mirror/decide.ts";
import type { Departure } from "../placement/departures.ts";
import type { SyncResult } from "../sync/sync.ts";

// What a change does to the fleet's CRs, read off the syncs of base and head: which files changed, and which
// CRs head's sync creates, updates, refuses, leaves blocked, prunes (behind its safeguards) or keeps for a
// departed cluster's grace period; a CR removed and another made for the same cluster is one reinstall.

export interface ChangedFile {
  path: string;
  change: "added" | "modified" | "removed";
}

/** Fleet files whose text differs between base and head, by path. */
export function changedFiles(base: readonly FleetFile[], head: readonly FleetFile[]): ChangedFile[] {
  const before = new Map(base.map((file) => [file.path, fleetFileContent(file)]));
  const after = new Map(head.map((file) => [file.path, fleetFileContent(file)]));
  return [...new Set([...before.keys(), ...after.keys()])]
    .sort(compareStrings)
    .flatMap((path): ChangedFile[] => {
      const [was, will] = [before.get(path), after.get(path)];
      if (was === will) return [];
      return [{ path, change: was === undefined ? "added" : will === undefined ? "removed" : "modified" }];
    });
}

/**
 * `blocked`: head declares the CR in a file with errors, so the mirror leaves its hub CR (and cluster) at
 * the last good state. `refused`: the hub's admission refuses it, or another repository owns it.
 * `reinstall`: the CR replaces another that is removed for the same cluster under another name.
 */
export type ResourceAction = "create" | "update" | "reinstall" | "delete" | "blocked" | "refused";

/** What the prune does with a removed CR once head is merged. */
export interface RemovalDecision {
  /**
   * `pruned` deletes the hub CR (its finalizer then runs FinalizeRemoteCluster); `held` waits for a
   * person's confirmation; `skipped` waits for a safeguard to clear; `retained` never deletes it
   * (`fleet.knative.dev/prune: disabled`); `departure` deletes it once its cluster has stayed out of its
   * placement for the departure grace period.
   */
  prune: "pruned" | "held" | "skipped" | "retained" | "departure";
  message?: string;
  /** For a held prune: the token that confirms exactly this prune on the hub. */
  token?: string;
}

/** A CR the merge changes. */
export interface ResourceChange {
  identity: ResourceIdentity;
  action: ResourceAction;
  /** The CR as base declares it; for a reinstall, the CR it replaces. */
  base?: DesiredResource;
  /** The CR as head declares it: created, updated or reinstalled. */
  head?: DesiredResource;
  /** The fleet file declaring it: head's, else base's. */
  path: string;
  /** Why the hub refuses it: the admission, or another repository's CR of that name. */
  refusal?: string;
  /** A delete's (or the replaced CR's) prune decision. */
  removal?: RemovalDecision;
  /** A reinstall's removed CR. */
  replaces?: ResourceIdentity;
}

/**
 * The CRs the merge changes, by identity, from what head's sync does after base's: its creates and updates
 * (a CR whose content is unchanged, moved to another file, is no change), refusals, the CRs of its failed
 * files, its prune and the departures it keeps.
 */
export function resourceChanges(base: SyncResult, head: SyncResult, gracePeriod: string): ResourceChange[] {
  const baseDesired = byIdentity(base.model.resources);
  const headDesired = byIdentity(head.model.resources);
  const changes = new Map<string, ResourceChange>();
  for (const outcome of head.resources) {
    const key = formatIdentity(outcome);
    const identity = { kind: outcome.kind, namespace: outcome.namespace, name: outcome.name };
    const before = baseDesired.get(key);
    const after = headDesired.get(key);
    const common = { identity, path: outcome.path, ...(before && { base: before }) };
    if (outcome.action === "create" || outcome.action === "update") {
      if (before && after && canonicalJson(before.resource) === canonicalJson(after.resource)) continue;
      changes.set(key, { ...common, action: outcome.action, ...(after && { head: after }) });
    } else if (outcome.action === "refused" || outcome.action === "conflict") {
      const refusal = outcome.error ?? outcome.reason ?? "";
      changes.set(key, { ...common, action: "refused", refusal, ...(after && { head: after }) });
    }
  }
  for (const file of head.failedFiles) {
    for (const identity of file.declares) {
      const key = formatIdentity(identity);
      const before = baseDesired.get(key);
      changes.set(key, { identity, action: "blocked", path: file.path, ...(before && { base: before }) });
    }
  }
  const removed = (
    candidate: ResourceIdentity & { path?: string },
    removal: RemovalDecision,
  ): ResourceChange => {
    const before = baseDesired.get(formatIdentity(candidate));
    const { kind, namespace, name } = candidate;
    return {
      identity: { kind, namespace, name },
      action: "delete",
      path: before?.path ?? candidate.path ?? "",
      ...(before && { base: before }),
      removal,
    };
  };
  for (const candidate of head.prune.candidates) {
    changes.set(formatIdentity(candidate), removed(candidate, pruneDecision(head.prune)));
  }
  for (const candidate of head.prune.retained) {
    changes.set(formatIdentity(candidate), removed(candidate, RETAINED));
  }
  // A departed cluster's CR as the prune step decided: kept for the grace period unless it prunes it now.
  const pruning = new Set(head.prune.candidates.map(formatIdentity));
  for (const departure of head.placements.departures) {
    if (pruning.has(formatIdentity(departure))) continue;
    changes.set(formatIdentity(departure), removed(departure, departed(departure, gracePeriod)));
  }
  return withReinstalls([...changes.values()]).sort((a, b) =>
    compareStrings(formatIdentity(a.identity), formatIdentity(b.identity)),
  );
}

/**
 * A CR created for a cluster whose CR of the kind is removed (a cluster moved from its own file into a
 * placement, a placement renamed): one reinstall, the create carrying the removal of the CR it replaces.
 */
function withReinstalls(changes: readonly ResourceChange[]): ResourceChange[] {
  const slot = (change: ResourceChange, desired: DesiredResource | undefined) =>
    desired?.resource.spec.clusterProfileRef &&
    `${change.identity.kind} ${clusterLabel(desired.resource.spec.clusterProfileRef)}`;
  const goes = (change: ResourceChange) =>
    change.action === "delete" &&
    (change.removal?.prune === "pruned" || change.removal?.prune === "departure");
  const removals = new Map(
    changes.filter(goes).flatMap((change) => {
      const key = slot(change, change.base);
      return key ? [[key, change] as const] : [];
    }),
  );
  const replaced = new Set<ResourceChange>();
  const merged = changes.map((change): ResourceChange => {
    const removal = change.action === "create" ? removals.get(slot(change, change.head) ?? "") : undefined;
    if (removal === undefined || replaced.has(removal)) return change;
    replaced.add(removal);
    return {
      ...change,
      action: "reinstall",
      ...(removal.base && { base: removal.base }),
      ...(removal.removal && { removal: removal.removal }),
      replaces: removal.identity,
    };
  });
  return merged.filter((change) => !replaced.has(change));
}

function byIdentity(resources: readonly DesiredResource[]): Map<string, DesiredResource> {
  return new Map(resources.map((desired) => [formatIdentity(identityOf(desired.resource)), desired]));
}

const RETAINED: RemovalDecision = {
  prune: "retained",
  message:
    "fleet.knative.dev/prune: disabled keeps the CR on the hub and Knative on its cluster; delete the hub CR to uninstall",
};

/** What the prune's safeguards do with the removed CRs. */
function pruneDecision(report: PruneReport): RemovalDecision {
  if (report.state === "held") {
    return { prune: "held", message: report.message, token: report.confirmation.token };
  }
  if (report.state === "skipped") return { prune: "skipped", message: report.message };
  return { prune: "pruned" };
}

/** A cluster out of its placement: its CR is pruned once it has stayed out the grace period. */
function departed(departure: Departure, gracePeriod: string): RemovalDecision {
  return {
    prune: "departure",
    message:
      `${departure.cluster} leaves ${departure.placement}: its CR is kept for the departure grace period ` +
      `(${gracePeriod}) and pruned once the cluster has stayed out that long, behind the prune safeguards`,
  };
}
