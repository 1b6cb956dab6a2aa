import { clusterLabel } from "../access/target.ts";
import type { KnativeResource } from "../api/knative.ts";
import type { ApplyResult } from "../apply/engine.ts";
import { inParallel } from "../apply/parallel.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { formatIdentity, type ResourceIdentity } from "../fleet/identity.ts";
import { buildFleetModel, type FleetModel } from "../fleet/model.ts";
import { DEFAULT_NAMESPACE } from "../fleet/parse.ts";
import { convergedState, NOTHING_INSTALLED } from "../install/apply.ts";
import { renderInstall } from "../install/desired.ts";
import { installNamespace } from "../install/identity.ts";
import { isPresent, removalOf, removedBy, sharingCr } from "../install/removal.ts";
import { type KubeObject, type ObjectRef, objectKey, refKey, refOf } from "../kube/object.ts";
import type { MirrorOptions, PruneReport } from "../mirror/decide.ts";
import type { Release, ReleaseLoader } from "../render/index.ts";
import { assessPrune, changedFiles, type ResourceChange, resourceChanges } from "./changes.ts";
import { clusterChange, ingressChange, kubernetesTooOld, renderFailure, versionJump } from "./checks.ts";
import { type ClusterView, type LiveClusters, liveView, offlineView } from "./cluster-view.ts";
import { diffObjects } from "./diff.ts";
import { maskText } from "./mask.ts";
import type {
  ClusterPlan,
  Finding,
  FleetPlan,
  ObjectChange,
  PlanSource,
  RemovalReport,
  ResourcePlan,
} from "./report.ts";
import type { Revision, Revisions } from "./revisions.ts";

export interface PlanOptions {
  releases: ReleaseLoader;
  /** The hub and spokes to read; without them the plan is offline. */
  clusters?: LiveClusters;
  /** Each cluster's Kubernetes version, by `namespace/name`, as its ClusterProfile reports it. */
  kubernetesVersions?: ReadonlyMap<string, string>;
  /** CRs planned at once, and dry runs sent at once per CR. */
  concurrency?: number;
  /** The service's settings (`--config`): the namespace of a CR that names none, the prune safeguards. */
  defaultNamespace?: string;
  prune?: MirrorOptions;
}

/** The cluster of a CR that only an invalid file declares: it was never applied anywhere. */
const UNKNOWN_CLUSTER = "(unknown: invalid file)";
const OFFLINE_REASON = "no --kubeconfig was given: no cluster was read; rendered base and head are compared";
const DEFAULT_CONCURRENCY = 8;

interface PlanContext {
  head: FleetModel;
  prune: PruneReport;
  options: PlanOptions;
  concurrency: number;
}

/**
 * What merging head into base does to every cluster: head's validation, each changed CR's objects
 * (created, changed field by field, deleted), version and ingress checks, and what removing a file
 * uninstalls. Live, the cluster's state is read and changes come from server-side dry runs; offline,
 * base's rendering stands in for the cluster. Writes nothing anywhere.
 */
export async function buildPlan(revisions: Revisions, options: PlanOptions): Promise<FleetPlan> {
  const modelOf = (revision: Revision) =>
    buildFleetModel(revision.files, { defaultNamespace: options.defaultNamespace ?? DEFAULT_NAMESPACE });
  const [base, head] = [modelOf(revisions.base), modelOf(revisions.head)];
  const { repository } = revisions;
  const prune = assessPrune(
    base,
    head,
    {
      repository,
      branch: revisions.base.ref,
      commit: revisions.base.commit,
    },
    options.prune,
  );
  const context = { head, prune, options, concurrency: options.concurrency ?? DEFAULT_CONCURRENCY };
  const changes = resourceChanges(base, head);
  const resources: ResourcePlan[] = [];
  await inParallel([...changes.keys()], context.concurrency, async (index) => {
    resources[index] = await planResource(changes[index]!, context);
  });
  const findings = resources.flatMap((resource) => resource.findings);
  const diagnostics = head.diagnostics.map((d) => ({ ...d, message: maskText(d.message) }));
  return {
    repository,
    base: { ref: revisions.base.ref, commit: revisions.base.commit },
    head: { ref: revisions.head.ref, commit: revisions.head.commit },
    source: options.clusters ? "live" : "offline",
    files: changedFiles(revisions.base.files, revisions.head.files),
    diagnostics,
    prune: { state: prune.state, reason: prune.reason, message: prune.message },
    clusters: byCluster(resources),
    errors: diagnostics.length + findings.filter((finding) => finding.severity === "error").length,
    warnings: findings.filter((finding) => finding.severity === "warning").length,
  };
}

async function planResource(change: ResourceChange, context: PlanContext): Promise<ResourcePlan> {
  // Base's cluster first: clusterProfileRef is immutable, so a CR stays where base put it.
  const declared = (change.base ?? change.head)?.resource;
  const plan: ResourcePlan = {
    ...change.identity,
    cluster: declared ? clusterLabel(declared.spec.clusterProfileRef) : UNKNOWN_CLUSTER,
    path: change.path,
    action: change.action,
    objects: { created: [], changed: [], deleted: [] },
    findings: [],
  };
  switch (change.action) {
    case "blocked":
      return plan;
    case "delete":
      return planRemoval(plan, change.base?.resource, context);
    default:
      return planApplied(plan, change.base?.resource, change.head!.resource, context);
  }
}

/** A created or updated CR: what one apply pass of head does on its cluster. */
async function planApplied(
  plan: ResourcePlan,
  base: KnativeResource | undefined,
  head: KnativeResource,
  context: PlanContext,
): Promise<ResourcePlan> {
  const moved = base && clusterChange(base, head);
  if (moved) return { ...plan, findings: [moved] };
  let release: Release;
  let rendered: KubeObject[];
  try {
    release = await context.options.releases.load(head);
    rendered = renderInstall(head, release);
  } catch (err) {
    return { ...plan, findings: [renderFailure(err)] };
  }
  const before = base && (await renderBase(base, context));
  const { view, ...viewed } = await clusterView(head, before, context);
  const version = { from: view.installedVersion, to: release.version };
  const jump = versionJump(head, view.installedVersion, release);
  if (jump) return { ...plan, ...viewed, version, findings: [...viewed.findings, jump] };
  const ref = head.spec.clusterProfileRef;
  const tooOld = ref && kubernetesTooOld(context.options.kubernetesVersions?.get(clusterLabel(ref)), release);
  if (tooOld) return { ...plan, ...viewed, version, findings: [...viewed.findings, tooOld] };

  // An adopted install (older upstream layout) is planned where it is.
  if (view.adopted) rendered = renderInstall(head, release, view.namespace);
  const pass = await view.dryRun(head, rendered, context.concurrency);
  const changed = changesOf(pass);
  // A cluster without the install has no traffic to move.
  const ingress =
    plan.action === "update" && pass.state.inventoryExists
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
  return {
    ...plan,
    ...viewed,
    version,
    objects: {
      created: sortRefs([...pass.plan.setup, ...pass.plan.create.map(refOf)]),
      changed,
      deleted: sortRefs(pass.plan.prune),
    },
    findings: [...viewed.findings, ...(ingress ? [ingress] : []), ...refused],
  };
}

/** A removed CR: whether the mirror prunes it, and what FinalizeRemoteCluster then deletes. */
async function planRemoval(
  plan: ResourcePlan,
  base: KnativeResource | undefined,
  context: PlanContext,
): Promise<ResourcePlan> {
  const decision = pruneDecision(plan, context.prune);
  const findings = pruneFindings(decision);
  if (decision.prune === "retained" || !base) {
    return { ...plan, removal: { ...decision, kept: [] }, findings };
  }
  // The hub controller leaves a cluster alone while another CR of the kind installs on it.
  const sharing = sharingCr(
    base,
    context.head.resources.map(({ resource }) => resource),
  );
  if (sharing) {
    const sharedWith = formatIdentity({ ...sharing.metadata, kind: sharing.kind });
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
  const uninstall: Finding = {
    severity: "warning",
    code: "removes-knative",
    message:
      deleted.length > 0
        ? `merging uninstalls ${base.kind} from ${plan.cluster}: ${deleted.length} objects are deleted`
        : `merging deletes the hub CR; ${plan.cluster} has nothing of its install, so nothing is deleted there`,
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
    return { release, objects: renderInstall(resource, release) };
  } catch {
    return undefined;
  }
}

/**
 * The CR's cluster: live when clusters were given and this one answers, else base's rendering stands in
 * (converged: applied and recorded in the anchor), with the reason.
 */
async function clusterView(
  resource: KnativeResource,
  base: { release: Release; objects: KubeObject[] } | undefined,
  context: PlanContext,
): Promise<{
  view: ClusterView;
  source: PlanSource;
  offlineReason?: string;
  findings: Finding[];
}> {
  const baseVersion = base?.release.version;
  const offline = () =>
    offlineView(resource, base ? convergedState(resource, base.objects) : NOTHING_INSTALLED, baseVersion);
  const { clusters } = context.options;
  if (!clusters) return { view: offline(), source: "offline", offlineReason: OFFLINE_REASON, findings: [] };
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
      findings: [{ severity: "error", code: "cluster-unreachable", message }],
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

function pruneDecision(identity: ResourceIdentity, report: PruneReport): Omit<RemovalReport, "kept"> {
  const key = formatIdentity(identity);
  if (report.retained.some((candidate) => formatIdentity(candidate) === key)) {
    return {
      prune: "retained",
      message:
        "fleet.knative.dev/prune: disabled keeps the CR on the hub and Knative on its cluster; delete the hub CR to uninstall",
    };
  }
  if (report.state === "held") {
    return { prune: "held", message: report.message, token: report.confirmation?.token };
  }
  if (report.state === "skipped") return { prune: "skipped", message: report.message };
  return { prune: "pruned" };
}

function pruneFindings(decision: Omit<RemovalReport, "kept">): Finding[] {
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
