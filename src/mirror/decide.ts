import { createHash } from "node:crypto";
import { z } from "zod";
import { admitHubCr, type HubCrPolicy } from "../admission/hub-cr.ts";
import {
  ADOPT_ANNOTATION,
  isManagedByFleet,
  isPruneDisabled,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../api/labels.ts";
import { isUpToDate, withDesiredHash } from "../apply/compare.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import type { DesiredResource, FleetModel } from "../fleet/model.ts";
import type { KubeObject } from "../kube/object.ts";
import { redactSecrets } from "../observability/redact.ts";
import { count } from "../text/count.ts";

// The pure half of the mirror: from the fleet model of one commit and the CRs on the hub, what to apply and
// what to prune. Everything is derived from those two, so a sync cut short by a restart simply runs again.

export const MirrorOptionsSchema = z.strictObject({
  prune: z.boolean().default(true).describe("Delete mirrored CRs whose fleet file no longer declares them."),
  allowEmpty: z
    .boolean()
    .default(false)
    .describe("Prune even when the fleet repository declares no CR at all."),
  maxPruneFraction: z
    .number()
    .min(0)
    .max(1)
    .default(0.5)
    .describe("The largest share of the mirrored CRs one sync prunes without a person's confirmation."),
});
export type MirrorOptions = z.infer<typeof MirrorOptionsSchema>;

/** Where the desired state comes from. */
export interface MirrorSource {
  repository: string;
  branch: string;
  commit: string;
}

export interface MirrorInput {
  model: FleetModel;
  source: MirrorSource;
  options: MirrorOptions;
  /** knative-fleet's own hub namespace, where the prune-confirmation ConfigMap lives. */
  namespace: string;
  /** What may come onto the hub (src/admission): a CR it refuses is reported as `refused` and not written. */
  admission: HubCrPolicy;
}

/**
 * What a sync does with a desired CR. `conflict`: a CR of that kind and name exists on the hub that is not
 * this repository's (made by hand, or mirrored from another repository) and is left alone; `terminating`:
 * the hub CR is being deleted and is created again by the first sync after its finalizer is done;
 * `refused`: the admission (src/admission) or the hub refused it.
 */
type MirrorAction = "create" | "update" | "unchanged" | "conflict" | "terminating" | "refused" | "waiting";

export interface ResourceOutcome extends ResourceIdentity {
  /** The fleet file that declares the CR. */
  path: string;
  action: MirrorAction;
  /** Why the hub refused the create or update, or why the mirror refused the file's CR. */
  error?: string;
  /**
   * Why a change waits (`waiting`: the rollout's wave is not open), why an update is made (a revert), or
   * whose the CR is (`conflict`).
   */
  reason?: string;
}

export type ApplyStep =
  | (ResourceOutcome & { action: "create" | "update"; object: KubeObject })
  | (ResourceOutcome & { action: "unchanged" | "terminating" })
  | (ResourceOutcome & { action: "conflict"; reason: string })
  | (ResourceOutcome & { action: "refused"; error: string })
  | (ResourceOutcome & { action: "waiting"; reason: string });

/** A CR mirrored from the repository that no fleet file declares any more. */
export interface PruneCandidate extends ResourceIdentity {
  /** The fleet file that declared it, from its source annotation. */
  path?: string;
  /** Why the hub refused the delete. */
  error?: string;
  /** Why the delete waits: deletions follow the rollout's waves in reverse. */
  waiting?: string;
}

/** Why candidates were kept: the prune safeguards, in the order they are checked. */
type PruneReason = "disabled" | "invalid-files" | "empty-desired-set" | "apply-failed" | "over-max-fraction";

/** The mirrored CRs no fleet file declares, and those of them `fleet.knative.dev/prune: disabled` keeps. */
interface PruneLists {
  /** The mirrored CRs no fleet file declares, but for `retained`. Unknown (empty) when Git was unreadable. */
  candidates: PruneCandidate[];
  /** The mirrored CRs no fleet file declares that `fleet.knative.dev/prune: disabled` keeps for good. */
  retained: PruneCandidate[];
}

/**
 * `none`: nothing to prune; `pruned`: the candidates were deleted; `skipped`, `held`: they were kept, for
 * the reason given (`message` for people). Only a held prune has a confirmation: the confirm-prune
 * annotation value, in that namespace, that releases exactly this prune.
 */
export type PruneReport = PruneLists &
  (
    | { state: "none" | "pruned"; reason?: undefined; message?: undefined; confirmation?: undefined }
    | { state: "skipped"; reason: PruneReason; message: string; confirmation?: undefined }
    | {
        state: "held";
        reason: "over-max-fraction";
        message: string;
        confirmation: { namespace: string; token: string };
      }
  );

/** The hub CR a desired CR becomes, with the commit it is written from. */
export function mirroredObject(desired: DesiredResource, source: MirrorSource): KubeObject {
  return withCommit(hubObject(desired, source), source.commit);
}

/** The hub CR a desired CR becomes, with everything but the commit: a new commit alone is no change. */
function hubObject({ resource, path }: DesiredResource, source: MirrorSource): KubeObject {
  const { metadata } = resource;
  return withDesiredHash({
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    metadata: {
      name: metadata.name,
      namespace: metadata.namespace,
      labels: { ...metadata.labels, [MANAGED_BY_LABEL]: MANAGED_BY },
      annotations: {
        ...metadata.annotations,
        [SOURCE_REPOSITORY_ANNOTATION]: source.repository,
        [SOURCE_PATH_ANNOTATION]: path,
      },
    },
    spec: resource.spec,
  });
}

/**
 * One step per desired CR, by identity. A CR the admission refuses is not written (nor is it pruned: it is
 * declared). A hub CR that is not this repository's is a conflict and left alone: one made by hand (no
 * managed-by label), or one mirrored from another repository, unless a person marked it for adoption by
 * this one (ADOPT_ANNOTATION). Otherwise a CR is applied only when its content differs from the hub's
 * (desired-hash and field comparison, as on the spokes), so a sync of an unchanged fleet writes nothing.
 * Without a policy (`plan`'s picture of a hub) only what no policy allows is refused.
 */
export function decideApplies(
  resources: readonly DesiredResource[],
  source: MirrorSource,
  live: readonly KubeObject[],
  admission?: HubCrPolicy,
): ApplyStep[] {
  const liveByIdentity = new Map(live.map((object) => [formatIdentity(identityOf(object)), object]));
  return resources
    .map((desired): ApplyStep => {
      const outcome = { ...identityOf(desired.resource), path: desired.path };
      const refusal = admitHubCr(desired.resource, admission);
      if (refusal) {
        // Refused like a failed apply: the hub CR keeps its last good state and nothing is pruned.
        const error = `${desired.path}:${desired.line}: ${refusal.field}: ${refusal.message}`;
        return { ...outcome, action: "refused", error };
      }
      const object = hubObject(desired, source);
      const current = liveByIdentity.get(formatIdentity(outcome));
      if (!current) return { ...outcome, action: "create", object: withCommit(object, source.commit) };
      const foreign = ownerConflict(current, source.repository);
      if (foreign) return { ...outcome, action: "conflict", reason: foreign };
      if (current.metadata.deletionTimestamp) return { ...outcome, action: "terminating" };
      if (isUpToDate(object, current)) return { ...outcome, action: "unchanged" };
      return { ...outcome, action: "update", object: withCommit(object, source.commit) };
    })
    .sort(compareIdentities);
}

/** Why a hub CR is not this repository's to change, or undefined when it is. */
function ownerConflict(current: KubeObject, repository: string): string | undefined {
  if (!isManagedByFleet(current)) {
    return (
      "a CR of this kind and name exists on the hub without the label app.kubernetes.io/managed-by: " +
      "knative-fleet (made by hand); delete it, or add the label to hand it over"
    );
  }
  const annotations = current.metadata.annotations ?? {};
  const owner = annotations[SOURCE_REPOSITORY_ANNOTATION];
  if (owner === repository || annotations[ADOPT_ANNOTATION] === repository) return undefined;
  return redactSecrets(
    `the hub CR was mirrored from ${owner === undefined ? "an unnamed repository" : `repository ${owner}`} ` +
      `(${SOURCE_REPOSITORY_ANNOTATION}); to hand it over to this one, annotate the hub CR ` +
      `${ADOPT_ANNOTATION}=${repository}`,
  );
}

/**
 * Which of the CRs mirrored from this repository to delete, behind the safeguards (a commit that cannot be
 * fetched or read is never synced at all: the poller emits only whole snapshots): nothing is pruned when
 * pruning is off, when any fleet file failed validation (a broken file must not
 * uninstall what it declared), when Git declares no CR at all (unless allowEmpty), or when an apply of this
 * sync failed (a renamed CR whose new copy was refused keeps the old one). A prune of more than
 * maxPruneFraction of the mirrored CRs is held until a person confirms it with the token reported here.
 */
export function decidePrune(
  input: Pick<MirrorInput, "model" | "source" | "options" | "namespace">,
  live: readonly KubeObject[],
  sync: { applyFailures: number; confirmedToken: string | undefined; held?: readonly ResourceIdentity[] },
): PruneReport {
  const { model, options } = input;
  const failedFiles = model.files.filter((file) => file.status === "failed");
  // The CRs of a failed file count as declared: they keep their last good state; so do held ones.
  const declared = new Set(
    [
      ...model.resources.map((desired) => identityOf(desired.resource)),
      ...failedFiles.flatMap((file) => file.declares),
      ...(sync.held ?? []),
    ].map(formatIdentity),
  );
  // Only this repository's CRs are its to prune; one being deleted is on its way out already (its finalizer
  // is cleaning its cluster) and is not counted.
  const mirrored = live.filter(
    (object) =>
      isManagedByFleet(object) &&
      object.metadata.annotations?.[SOURCE_REPOSITORY_ANNOTATION] === input.source.repository &&
      !object.metadata.deletionTimestamp,
  );
  const orphans = mirrored.filter((object) => !declared.has(formatIdentity(identityOf(object))));
  const retained = orphans.filter((object) => isPruneDisabled(object.metadata.annotations)).map(candidateOf);
  const candidates = orphans
    .filter((object) => !isPruneDisabled(object.metadata.annotations))
    .map(candidateOf);
  retained.sort(compareIdentities);
  candidates.sort(compareIdentities);
  if (candidates.length === 0) return { state: "none", candidates, retained };

  const safeguards: { applies: boolean; reason: PruneReason; message: string }[] = [
    { applies: !options.prune, reason: "disabled", message: "pruning is disabled (prune: false)" },
    {
      applies: failedFiles.length > 0,
      reason: "invalid-files",
      message: `${count(failedFiles.length, "fleet file")} failed validation; nothing is pruned until every file is valid`,
    },
    {
      applies: model.resources.length === 0 && !options.allowEmpty,
      reason: "empty-desired-set",
      message: "the fleet repository declares no CR; pruning everything needs allowEmpty: true",
    },
    {
      applies: sync.applyFailures > 0,
      reason: "apply-failed",
      message: `${count(sync.applyFailures, "CR")} failed to apply; nothing is pruned until every CR applies`,
    },
  ];
  const safeguard = safeguards.find((check) => check.applies);
  if (safeguard) {
    const { reason, message } = safeguard;
    return { state: "skipped", reason, message, candidates, retained };
  }

  const fraction = candidates.length / mirrored.length;
  const token = pruneToken(candidates);
  if (fraction > options.maxPruneFraction && sync.confirmedToken !== token) {
    return {
      state: "held",
      reason: "over-max-fraction",
      message:
        `pruning ${candidates.length} of ${mirrored.length} mirrored CRs (${percent(fraction)}) exceeds ` +
        `maxPruneFraction ${percent(options.maxPruneFraction)} and waits for a person's confirmation`,
      candidates,
      retained,
      confirmation: { namespace: input.namespace, token },
    };
  }
  return { state: "pruned", candidates, retained };
}

/**
 * Names exactly the CRs a prune deletes, so a confirmation given for one prune can never release another;
 * it does not change with commits that leave that set alone (the status write-back's included).
 */
export function pruneToken(candidates: readonly ResourceIdentity[]): string {
  const identities = candidates.map(formatIdentity).sort(compareStrings).join("\n");
  return createHash("sha256").update(identities).digest("hex").slice(0, 16);
}

/**
 * The prune-confirmation ConfigMap's data key that says which prune waits for a person. Every reader and
 * the writer share it, and each sync writes the record again: a renamed key is simply written anew.
 */
export const HELD_PRUNE_KEY = "held";

/** A held prune as people (and `knative-fleet status`) read it; the candidates named are bounded. */
export const HeldPruneSchema = z.object({
  token: z.string(),
  message: z.string(),
  count: z.number(),
  candidates: z.array(z.string()),
});
export type HeldPrune = z.infer<typeof HeldPruneSchema>;

const MAX_HELD_NAMED = 20;

/** The text of the held-prune record of a prune report; undefined when nothing waits for a person. */
export function heldPruneRecord(prune: PruneReport): string | undefined {
  if (prune.state !== "held") return undefined;
  const record: HeldPrune = {
    token: prune.confirmation.token,
    message: prune.message,
    count: prune.candidates.length,
    candidates: prune.candidates.slice(0, MAX_HELD_NAMED).map(formatIdentity),
  };
  return JSON.stringify(record);
}

function compareIdentities(a: ResourceIdentity, b: ResourceIdentity): number {
  return (
    compareStrings(a.kind, b.kind) ||
    compareStrings(a.namespace, b.namespace) ||
    compareStrings(a.name, b.name)
  );
}

function candidateOf(object: KubeObject): PruneCandidate {
  const path = object.metadata.annotations?.[SOURCE_PATH_ANNOTATION];
  return { ...identityOf(object), ...(path ? { path } : {}) };
}

function withCommit(object: KubeObject, commit: string): KubeObject {
  const annotations = { ...object.metadata.annotations, [SOURCE_COMMIT_ANNOTATION]: commit };
  return { ...object, metadata: { ...object.metadata, annotations } };
}

const percent = (fraction: number): string => `${Math.round(fraction * 100)}%`;
