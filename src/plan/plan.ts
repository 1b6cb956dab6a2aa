import type { KnativeResource } from "../api/knative.ts";
import { DRIFT_MODE_ANNOTATION } from "../api/labels.ts";
import type { ApplyResult } from "../apply/engine.ts";
import { mapInParallel } from "../apply/parallel.ts";
import { compareStrings, isError } from "../fleet/diagnostic.ts";
import { formatDuration } from "../fleet/duration.ts";
import { clusterLabel, formatIdentity, identityOf } from "../fleet/identity.ts";
import { convergedState, NOTHING_INSTALLED } from "../install/apply.ts";
import { renderInstall } from "../install/desired.ts";
import { installNamespace } from "../install/identity.ts";
import { isPresent, removalOf, removedBy, sharingCr } from "../install/removal.ts";
import { type KubeObject, type ObjectRef, objectKey, refKey, refOf } from "../kube/object.ts";
import { listHubResources, MemoryHub } from "../mirror/mirror.ts";
import type { Inventory } from "../placement/inventory.ts";
import { NEEDS_HUB, planPlacements } from "../placement/plan.ts";
import { createPreflight, type Preflight } from "../preflight/index.ts";
import { COMPONENT_OF_KIND, type Release, type ReleaseLoader } from "../render/index.ts";
import { planRollout, type RolloutChange } from "../rollout/plan.ts";
import type { FleetSettings } from "../sync/settings.ts";
import { fixedPlacements, type SyncResult, sync } from "../sync/sync.ts";
import { count } from "../text/count.ts";
import type { ChainedCr } from "../upgrade/chain.ts";
import { changedFiles, type RemovalDecision, type ResourceChange, resourceChanges } from "./changes.ts";
import {
  clusterChange,
  hubRefuses,
  ingressChange,
  kubernetesTooOld,
  placementFindings,
  renderFailure,
  rolloutFindings,
  spokePreflight,
  versionJump,
} from "./checks.ts";
import { type ClusterView, type LiveClusters, liveView, offlineView } from "./cluster-view.ts";
import { diffObjects } from "./diff.ts";
import type { PlanInventory } from "./inventory.ts";
import { maskText } from "./mask.ts";
import type {
  ClusterPlan,
  Finding,
  FleetFinding,
  FleetPlan,
  ObjectChange,
  PlanSource,
  ResourcePlan,
} from "./report.ts";
import type { Revision, Revisions } from "./revisions.ts";
import { reviewedSpec } from "./spec.ts";

export interface PlanOptions {
  releases: ReleaseLoader;
  /** The service's settings (`--config`, or its defaults): the plan treats the change as the service will. */
  settings: FleetSettings;
  /** The directory local manifest paths may point into (the release manifests' kodata). */
  kodataDir?: string;
  /**
   * The repository as the service names it (its `repository.url`): live, the hub's CRs are this
   * repository's. Without it, the hub is taken to hold base's CRs and nothing else.
   */
  repository?: string;
  /** What placements select from and each cluster's Kubernetes version; unknown without it. */
  inventory?: PlanInventory;
  /** The hub and spokes to read; without them the plan is offline. */
  clusters?: LiveClusters;
  /**
   * Why a live plan is offline after all (the hub could not be read): said once at the top of the plan,
   * and each CR's part refers to it.
   */
  offlineReason?: string;
  /** Live: CRs planned at once, and dry runs sent at once per CR (offline, one CR at a time). */
  concurrency?: number;
}

/** The cluster of a CR that only an invalid file declares: it was never applied anywhere. */
const UNKNOWN_CLUSTER = "(unknown: invalid file)";
const OFFLINE_REASON = "no --kubeconfig was given: no cluster was read; rendered base and head are compared";
const HUB_UNREAD_REASON = "the hub could not be read (see the top): rendered base and head are compared";
const DEFAULT_CONCURRENCY = 8;
const UNKNOWN_INVENTORY: Inventory = { clusters: undefined, decisions: undefined, unknownReason: NEEDS_HUB };

interface PlanContext {
  head: SyncResult;
  /** Head's upgrade chains by CR (chainsOf): each CR is looked up once, never searched for. */
  chains: ReadonlyMap<string, ChainedCr>;
  options: PlanOptions;
  concurrency: number;
  /** Live: each cluster's readiness for its CR, read once per cluster. */
  preflight?: Preflight;
}

/**
 * The service's sync of base and then of head, dry, over one picture of the hub: the hub as merging base
 * would leave it (offline: base's CRs alone; live, with the service's repository known: the hub's CRs as
 * they are), then what merging head does to it. The same steps the service runs (src/sync), no write.
 */
export async function syncRevisions(
  revisions: Revisions,
  options: Pick<PlanOptions, "settings" | "kodataDir" | "repository" | "inventory" | "clusters"> &
    Partial<Pick<PlanOptions, "releases">>,
): Promise<{ base: SyncResult; head: SyncResult }> {
  const live = options.clusters && options.repository ? await listHubResources(options.clusters.hub) : [];
  const edges = {
    hub: new MemoryHub(live),
    // The departure clock starts at the merge: a plan says "after the grace period", never a time.
    placements: fixedPlacements(
      options.inventory?.inventory ?? UNKNOWN_INVENTORY,
      options.settings.departureGracePeriodMs,
      () => 0,
    ),
    // The settings check, as the service runs it: a CR with a setting error fails its file. Without
    // release manifests (no kodataDir) there is nothing to check against: the plan then renders only what
    // changed, and asks for them only if something did.
    ...(options.kodataDir !== undefined && { releases: options.releases }),
  };
  const settings = { fleet: options.settings, kodataDir: options.kodataDir };
  const repository = options.repository ?? revisions.repository;
  const syncOf = ({ ref, commit, files }: Revision) =>
    sync({ source: { repository, branch: ref, commit }, files }, settings, edges);
  const base = await syncOf(revisions.base);
  return { base, head: await syncOf(revisions.head) };
}

/**
 * What merging head into base does to every cluster: head's validation, each changed CR's objects
 * (created, changed field by field, deleted), version, Kubernetes and ingress checks, what a removal
 * uninstalls and when, what each placement selects and the waves the change goes through, placements'
 * CRs included. Live, the cluster's state is read and changes come from server-side dry runs; offline,
 * base's rendering stands in for the cluster. Writes nothing anywhere.
 */
export async function buildPlan(revisions: Revisions, options: PlanOptions): Promise<FleetPlan> {
  const { base, head } = await syncRevisions(revisions, options);
  const { clusters, releases } = options;
  const context: PlanContext = {
    head,
    chains: chainsOf(head.upgrades),
    options,
    concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
    ...(clusters && {
      preflight: createPreflight({
        targets: clusters.targets,
        releases: (kind) => releases.availableVersions(COMPONENT_OF_KIND[kind]),
      }),
    }),
  };
  // Offline, planning a CR is work for this one thread: several at once would only hold several installs'
  // renderings in memory together (100 placement CRs: 436 MiB peak at 8, 299 MiB one at a time).
  const crsAtOnce = options.clusters ? context.concurrency : 1;
  const gracePeriod = formatDuration(options.settings.departureGracePeriodMs);
  const changes = resourceChanges(base, head, gracePeriod);
  const resources = await mapInParallel(changes, crsAtOnce, (change) => planResource(change, context));
  const placements = planPlacements(
    base.placements.selections,
    head.placements.selections,
    options.inventory?.source ?? "none",
  );
  const rollout = planRollout(
    base.model.rollout,
    head.model.rollout,
    changes.flatMap(rolloutChange),
    options.inventory?.inventory.clusters,
  );
  const findings = [
    ...noFilesFinding(revisions, options.settings),
    ...leftOutFinding(revisions, options.settings),
    ...placementFindings(placements, gracePeriod),
    ...rolloutFindings(rollout),
  ];
  const all = [...resources.flatMap((resource) => resource.findings), ...findings];
  const diagnostics = [...head.diagnostics, ...(head.warnings ?? [])].map((d) => ({
    ...d,
    message: maskText(d.message),
  }));
  const warningDiagnostics = diagnostics.filter((d) => !isError(d)).length;
  return {
    repository: revisions.repository,
    base: { ref: revisions.base.ref, commit: revisions.base.commit },
    head: { ref: revisions.head.ref, commit: revisions.head.commit },
    source: options.clusters ? "live" : "offline",
    ...(options.offlineReason !== undefined && { offlineReason: maskText(options.offlineReason) }),
    files: changedFiles(revisions.base.files, revisions.head.files),
    ...(revisions.uncommitted && { uncommitted: revisions.uncommitted }),
    diagnostics,
    omittedDiagnostics: head.model.omittedDiagnostics,
    prune: { state: head.prune.state, reason: head.prune.reason, message: head.prune.message },
    clusters: byCluster(resources),
    placements,
    ...(rollout && { rollout }),
    findings,
    changes: resources.filter((r) => r.action !== "blocked" && r.action !== "refused").length,
    errors:
      diagnostics.length -
      warningDiagnostics +
      head.model.omittedDiagnostics +
      all.filter((finding) => finding.severity === "error").length,
    warnings: warningDiagnostics + all.filter((finding) => finding.severity === "warning").length,
  };
}

/** Files of head listed in a finding, at most. */
const MAX_LISTED_FILES = 10;

/**
 * YAML files head adds or changes that the glob leaves out (`clusters/new.yml` under `**\/*.yaml`): the PR
 * means them as fleet files, and the plan would otherwise show nothing for them and say nothing about why.
 * Those base already had unchanged are not listed again (a chart or a CI file in the repository).
 */
function leftOutFinding(revisions: Revisions, settings: FleetSettings): FleetFinding[] {
  const { base, head } = revisions;
  const touched = [...(head.leftOut ?? [])]
    .filter(([path, blob]) => base.leftOut?.get(path) !== blob)
    .map(([path]) => path);
  if (touched.length === 0) return [];
  const listed = touched.sort(compareStrings).slice(0, MAX_LISTED_FILES);
  const more = touched.length > listed.length ? `, … ${touched.length - listed.length} more` : "";
  return [
    {
      subject: head.ref,
      severity: "warning",
      code: "files-left-out",
      message: `head adds or changes ${touched.length === 1 ? "a YAML file" : `${touched.length} YAML files`} that ${settings.selection.pathGlob} leaves out, so nothing reads ${touched.length === 1 ? "it" : "them"}: ${listed.map(maskText).join(", ")}${more}`,
    },
  ];
}

/**
 * Head without a single fleet file is more often a wrong glob or a moved folder than an empty fleet: an
 * error, as for `validate` (the service would hold the prune of every CR for a person).
 */
function noFilesFinding(revisions: Revisions, settings: FleetSettings): FleetFinding[] {
  if (revisions.head.files.length > 0) return [];
  return [
    {
      subject: revisions.head.ref,
      severity: "error",
      code: "no-fleet-files",
      message: `no file of head matches ${settings.selection.pathGlob}: merging would remove every CR of the fleet`,
    },
  ];
}

/** A changed CR in the rollout's view: the cluster it installs on decides its wave. */
function rolloutChange(change: ResourceChange): RolloutChange[] {
  if (change.action === "blocked" || change.action === "refused") return [];
  const declared = (change.head ?? change.base)?.resource;
  return [
    {
      resource: formatIdentity(change.identity),
      cluster: declared?.spec.clusterProfileRef,
      change: change.action,
    },
  ];
}

async function planResource(change: ResourceChange, context: PlanContext): Promise<ResourcePlan> {
  // Base's cluster first: clusterProfileRef is immutable, so a CR stays where base put it.
  const declared = (change.action === "reinstall" ? change.head : (change.base ?? change.head))?.resource;
  const plan: ResourcePlan = {
    ...change.identity,
    cluster: declared ? clusterLabel(declared.spec.clusterProfileRef) : UNKNOWN_CLUSTER,
    path: change.path,
    action: change.action,
    ...(change.replaces && { replaces: formatIdentity(change.replaces) }),
    ...((change.action === "create" || change.action === "reinstall") &&
      change.head && { spec: reviewedSpec(change.head.resource) }),
    objects: { created: [], changed: [], deleted: [] },
    findings: [],
  };
  switch (change.action) {
    case "blocked":
      return plan;
    case "refused":
      return { ...plan, findings: [hubRefuses(change.refusal ?? "")] };
    case "delete":
      return planRemoval(plan, change, context);
    case "reinstall":
      return planReinstall(plan, change, context);
    default:
      return planApplied(
        withChain(plan, context.chains),
        change.base?.resource,
        change.head!.resource,
        context,
      );
  }
}

/**
 * The CRs on an upgrade chain by `Kind namespace/name`, built once for the plan (a CR listed twice: its
 * first entry). A lookup per CR, not a scan of the list formatting the CR's identity at every step: 8,000
 * CRs on a chain, ~2,000 -> ~7 ms (scripts/bench-reports.ts --pipeline).
 */
export function chainsOf(upgrades: readonly ChainedCr[] | undefined): Map<string, ChainedCr> {
  const chains = new Map<string, ChainedCr>();
  for (const cr of upgrades ?? []) if (!chains.has(cr.key)) chains.set(cr.key, cr);
  return chains;
}

/** A CR on an upgrade chain says so: the minors it goes through and the step this merge starts. */
export function withChain(plan: ResourcePlan, chains: ReadonlyMap<string, ChainedCr>): ResourcePlan {
  const chained = chains.get(formatIdentity(plan));
  if (chained === undefined) return plan;
  return { ...plan, chain: { minors: chained.minors, step: chained.step, target: chained.target } };
}

/** When a reinstall's replaced CR goes, by its prune decision. */
const REMOVED_WHEN: Record<RemovalDecision["prune"], string> = {
  pruned: "by the prune of this merge",
  held: "once a person confirms the prune it is held in",
  skipped: "once the prune's safeguard clears",
  departure: "once its cluster has been out of its placement for the departure grace period",
  retained: "never",
};

/**
 * A CR that replaces another on the same cluster: its install passes from the removed CR to this one.
 * What its first apply does is worked out over the removed CR's install (its objects there, not yet under
 * this CR's anchor); the removal itself leaves the cluster alone, as this CR installs there.
 */
async function planReinstall(
  plan: ResourcePlan,
  change: ResourceChange,
  context: PlanContext,
): Promise<ResourcePlan> {
  const previous = change.base!.resource;
  const applied = await planApplied(plan, previous, change.head!.resource, context, { reinstall: true });
  const replaced = formatIdentity(change.replaces!);
  const when = REMOVED_WHEN[change.removal!.prune];
  const reinstall: Finding = {
    severity: "warning",
    code: "reinstall",
    message:
      `${replaced} is removed ${when} and ${formatIdentity(change.identity)} installs ${previous.kind} on ` +
      `${plan.cluster} in its place: every object is applied again under the new CR's anchor, and the ` +
      `removal leaves the cluster alone while the new CR installs there. Should the removal come first ` +
      `(the new CR refused, or waiting for its rollout wave), ${plan.cluster} loses ${previous.kind} until ` +
      "the new CR installs it again.",
  };
  return {
    ...applied,
    removal: { ...change.removal!, sharedWith: formatIdentity(change.identity), kept: [] },
    findings: [reinstall, ...applied.findings],
  };
}

/**
 * A created or updated CR: what one apply pass of head does on its cluster. For a reinstall, `base` is the
 * CR it replaces, whose install is on the cluster under that CR's anchor.
 */
async function planApplied(
  plan: ResourcePlan,
  base: KnativeResource | undefined,
  head: KnativeResource,
  context: PlanContext,
  { reinstall = false } = {},
): Promise<ResourcePlan> {
  const moved = !reinstall && base && clusterChange(base, head);
  if (moved) return { ...plan, findings: [moved] };
  let release: Release;
  let rendered: readonly KubeObject[];
  try {
    release = await context.options.releases.load(head);
    rendered = renderInstall(head, release);
  } catch (err) {
    return { ...plan, findings: [renderFailure(err)] };
  }
  const before = base && (await renderBase(base, context));
  const { view, ...viewed } = await clusterView(head, before, context, { reinstall });
  const version = { from: view.installedVersion, to: release.version };
  const jump = versionJump(head, view.installedVersion, release);
  if (jump) return { ...plan, ...viewed, version, findings: [...viewed.findings, jump] };
  const ref = head.spec.clusterProfileRef;
  const kubernetes = context.options.inventory?.kubernetesVersions.get(clusterLabel(ref));
  const tooOld = ref && kubernetesTooOld(kubernetes, release);
  if (tooOld) return { ...plan, ...viewed, version, findings: [...viewed.findings, tooOld] };
  const preflight =
    viewed.source === "live" && context.preflight ? await spokePreflight(context.preflight, head) : [];

  // An adopted install (older upstream layout) is planned where it is.
  if (view.adopted) rendered = renderInstall(head, release, view.namespace);
  const pass = await view.dryRun(head, rendered, context.concurrency);
  const changed = changesOf(pass);
  // A cluster without the install has no traffic to move.
  const ingress =
    (plan.action === "update" || reinstall) && before !== undefined
      ? ingressChange(
          head,
          { release: before?.release, objects: pass.state.objects.values() },
          { release, objects: pass.desired },
        )
      : undefined;
  const refused = changed.flatMap((change): Finding[] =>
    change.refused === undefined
      ? []
      : [
          {
            severity: "error",
            code: "apply-refused",
            message: `${change.kind} ${change.name}: ${change.refused}`,
          },
        ],
  );
  const drift = viewed.source === "live" ? driftFindings(head, pass) : [];
  return {
    ...plan,
    ...viewed,
    version,
    objects: {
      created: sortRefs([...pass.plan.setup, ...pass.plan.create.map(refOf)]),
      changed,
      deleted: sortRefs(pass.plan.prune),
    },
    findings: [...viewed.findings, ...preflight, ...(ingress ? [ingress] : []), ...refused, ...drift],
  };
}

/**
 * What someone else changed on the cluster that head leaves as it is (docs/drift.md): a reviewer sees the
 * cluster's real state, and whether knative-fleet puts it back or, in report mode, keeps it.
 */
function driftFindings(head: KnativeResource, pass: ApplyResult): Finding[] {
  const kept = head.metadata.annotations?.[DRIFT_MODE_ANNOTATION] === "report";
  return pass.plan.drift.map((object): Finding => {
    const who = object.manager ? ` by ${object.manager}${object.at ? ` at ${object.at}` : ""}` : "";
    const what =
      object.change === "deleted"
        ? "deleted"
        : `changed${who}: ${object.fields.map((f) => `${f.path} ${f.want ?? "(absent)"} -> ${f.have ?? "(absent)"}`).join(", ")}`;
    const outcome = kept
      ? "kept (fleet.knative.dev/drift: report); a merge that changes this object overwrites it"
      : "knative-fleet puts it back at its next drift check, merged or not";
    return {
      severity: "warning",
      code: "drift",
      message: maskText(`${object.ref.kind} ${object.ref.name} ${what}; ${outcome}`),
    };
  });
}

/** A removed CR: whether and when the mirror prunes it, and what FinalizeRemoteCluster then deletes. */
async function planRemoval(
  plan: ResourcePlan,
  change: ResourceChange,
  context: PlanContext,
): Promise<ResourcePlan> {
  const base = change.base?.resource;
  const decision = change.removal!;
  const findings = pruneFindings(decision);
  if (decision.prune === "retained" || !base) {
    return { ...plan, removal: { ...decision, kept: [] }, findings };
  }
  // The hub controller leaves a cluster alone while another CR of the kind installs on it.
  const sharing = sharingCr(
    base,
    context.head.model.resources.map(({ resource }) => resource),
  );
  if (sharing) {
    const sharedWith = formatIdentity(identityOf(sharing));
    return { ...plan, removal: { ...decision, sharedWith, kept: [] }, findings };
  }
  const before = await renderBase(base, context);
  const { view, ...viewed } = await clusterView(base, before, context);
  const state = await view.state(base, before?.objects ?? []);
  // FinalizeRemoteCluster works from the anchor's inventory; without an anchor, from the rendered release.
  const inventory = state.inventoryExists ? state.inventory : (before?.objects.map(refOf) ?? []);
  const removal = removalOf(base, inventory, view.namespace);
  // Live, only what is there: deleting the rest is a no-op.
  const present = view.source === "live" ? isPresent(base, state, view.namespace) : () => true;
  const [deleted, kept] = [removedBy(removal).filter(present), removal.kept.filter(present)];
  const when = decision.prune === "departure" ? " after the departure grace period" : "";
  const uninstall: Finding = {
    severity: "warning",
    code: "removes-knative",
    message:
      deleted.length > 0
        ? `merging uninstalls ${base.kind} from ${plan.cluster}${when}: ${count(deleted.length, "object")} ${deleted.length === 1 ? "is" : "are"} deleted`
        : `merging deletes the hub CR${when}; ${plan.cluster} has nothing of its install, so nothing is deleted there`,
  };
  return {
    ...plan,
    ...viewed,
    version: { from: view.installedVersion },
    objects: { created: [], changed: [], deleted: sortRefs(deleted) },
    removal: { ...decision, kept: sortRefs(kept) },
    findings: [...viewed.findings, uninstall, ...findings],
  };
}

/** Base's release and rendering; undefined when base cannot be rendered either (it is then left out). */
async function renderBase(resource: KnativeResource, context: PlanContext) {
  try {
    const release = await context.options.releases.load(resource);
    return { release, objects: renderInstall(resource, release), resource };
  } catch {
    return undefined;
  }
}

/**
 * The CR's cluster: live when clusters were given and this one answers, else base's rendering stands in
 * (converged: applied and recorded in the anchor), with the reason. For a reinstall, base's install is
 * there under the replaced CR's anchor, and this CR has none yet.
 */
async function clusterView(
  resource: KnativeResource,
  base: { release: Release; objects: readonly KubeObject[]; resource: KnativeResource } | undefined,
  context: PlanContext,
  { reinstall = false } = {},
): Promise<{
  view: ClusterView;
  source: PlanSource;
  offlineReason?: string;
  findings: Finding[];
}> {
  const baseVersion = base?.release.version;
  const installed = base
    ? convergedState(reinstall ? base.resource : resource, base.objects)
    : NOTHING_INSTALLED;
  const state = reinstall ? { ...installed, inventory: [], inventoryExists: false } : installed;
  const offline = () => offlineView(resource, state, baseVersion);
  const { clusters } = context.options;
  if (!clusters) {
    const offlineReason = context.options.offlineReason === undefined ? OFFLINE_REASON : HUB_UNREAD_REASON;
    return { view: offline(), source: "offline", offlineReason, findings: [] };
  }
  try {
    const view = await liveView(clusters, resource, baseVersion);
    const adopted: Finding[] = view.adopted
      ? [
          {
            severity: "warning",
            code: "layout-adopted",
            message:
              `Knative is installed in namespace ${view.namespace} on this cluster (the upstream operator's ` +
              `layout up to 1.23): it is adopted there, nothing is installed in ${installNamespace(resource)}. ` +
              `The object changes below are worked out for ${view.namespace}.`,
          },
        ]
      : [];
    return { view, source: "live", findings: adopted };
  } catch (err) {
    const message = maskText(err instanceof Error ? err.message : String(err));
    return {
      view: offline(),
      source: "offline",
      offlineReason: `the cluster could not be read (${message}); rendered base and head are compared`,
      // A warning: nothing is wrong with the change; the exit code (2) says the plan is not all live.
      findings: [{ severity: "warning", code: "cluster-unreachable", message }],
    };
  }
}

/** The fields each update changes: the server's dry-run answer (offline: head) against the live object. */
function changesOf(pass: ApplyResult): ObjectChange[] {
  const changes = pass.plan.update.map(({ desired, live }): ObjectChange => {
    const answer = pass.answers.get(objectKey(desired));
    if (!answer || "refused" in answer) {
      return { ...refOf(desired), fields: [], refused: maskText(answer?.refused ?? "no dry-run answer") };
    }
    return { ...refOf(desired), fields: diffObjects(live, answer.after) };
  });
  return sortRefs(changes);
}

function pruneFindings(decision: RemovalDecision): Finding[] {
  if (decision.prune === "held") {
    return [
      {
        severity: "warning",
        code: "prune-held",
        message: `${decision.message}; once merged, confirm it on the hub with token ${decision.token} (see the fleet's status/README.md)`,
      },
    ];
  }
  if (decision.prune === "skipped") {
    return [{ severity: "warning", code: "prune-skipped", message: `not pruned yet: ${decision.message}` }];
  }
  return [];
}

function byCluster(resources: readonly ResourcePlan[]): ClusterPlan[] {
  return [...Map.groupBy(resources, (resource) => resource.cluster)]
    .sort(([a], [b]) => compareStrings(a, b))
    .map(([cluster, planned]) => ({ cluster, resources: planned }));
}

function sortRefs<T extends ObjectRef>(refs: readonly T[]): T[] {
  return [...refs].sort((a, b) => compareStrings(refKey(a), refKey(b)));
}
