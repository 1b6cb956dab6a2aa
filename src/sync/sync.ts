import { admitHubObject } from "../admission/hub-cr.ts";
import { KNATIVE_KINDS, type KnativeKind } from "../api/knative.ts";
import { mapInParallel } from "../apply/parallel.ts";
import { type Diagnostic, isError } from "../fleet/diagnostic.ts";
import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import {
  boundedDiagnostics,
  buildFleetModel,
  type FileResult,
  type FleetFile,
  type FleetModel,
} from "../fleet/model.ts";
import type { KubeObject } from "../kube/object.ts";
import {
  type ApplyStep,
  decideApplies,
  decidePrune,
  type MirrorSource,
  type PruneCandidate,
  type PruneReport,
  type ResourceOutcome,
} from "../mirror/decide.ts";
import { confirmedToken, type MirrorHub } from "../mirror/mirror.ts";
import { expandForSync, type PlacementReport, type PlacementSync } from "../placement/combine.ts";
import type { DepartureResult } from "../placement/departures.ts";
import type { Inventory } from "../placement/inventory.ts";
import { COMPONENT_OF_KIND, type ReleaseLoader } from "../render/index.ts";
import { checkFleetSettings } from "../render/settings-check.ts";
import type { GatedSteps, OpenedRollout, RolloutReport } from "../rollout/edge.ts";
import { type ChainedCr, chainUpgrades, type UpgradeChains, upgradeMemory } from "../upgrade/chain.ts";
import { type FleetSettings, hubCrPolicy } from "./settings.ts";

// One sync of a commit into the hub, as the steps it takes, in order. The service runs them for every
// commit, every inventory change and every rollout check; `plan` runs the same steps dry, on base and then
// on head, over a hub held in memory. Each step takes what the one before handed on. What a sync meets at
// its edges is the caller's: the hub (or its picture), what the placements select and how long a departed
// cluster is kept, and the rollout's gate (none for plan, which shows the waves instead).

/** What one sync did: for the service's log and metrics, the status files, and plan. */
export interface SyncResult {
  source: MirrorSource;
  /** The fleet model of the commit with every placement's CRs in it, each on its upgrade chain's step. */
  model: FleetModel;
  /** Every desired CR, by kind, namespace and name. */
  resources: ResourceOutcome[];
  prune: PruneReport;
  /** The fleet files' errors, the placements' conflicts and the settings check's errors among them. */
  diagnostics: Diagnostic[];
  /** The settings check's warnings (`severity: "warning"`), when it ran (a `releases` edge): never blocking. */
  warnings?: Diagnostic[];
  /** The files that failed validation, with the CRs they declare: those keep their last good state. */
  failedFiles: FileResult[];
  placements: PlacementReport;
  /** The CRs on their way through an upgrade chain, and the step each is given; absent when there are none. */
  upgrades?: ChainedCr[];
  /** Absent when the fleet has no rollout policy. */
  rollout?: RolloutReport;
}

/** The placements' edge: what selection reads, and the clock of clusters that left their placement. */
export interface SyncPlacements {
  inventory(): Inventory;
  hold(sync: PlacementSync, live: readonly KubeObject[], repository: string): DepartureResult;
}

/**
 * Placements against an inventory that does not change (a snapshot, or the hub read once), with a departure
 * clock of its own: `plan`'s edge, and the one of tests that run no watch.
 */
export function fixedPlacements(
  inventory: Inventory,
  gracePeriodMs: number,
  now: () => number = Date.now,
): SyncPlacements {
  let previous = new Map<string, number>();
  return {
    inventory: () => inventory,
    hold: (expanded, live, repository) => {
      const result = expanded.departures({ live, repository, now: now(), gracePeriodMs, previous });
      previous = result.since;
      return result;
    },
  };
}

/** The rollout's edge (src/rollout/stage.ts); a sync without one makes every change at once. */
export interface SyncRollout {
  open(model: FleetModel, commit: string): Promise<OpenedRollout | undefined>;
  gate(
    opened: OpenedRollout | undefined,
    steps: readonly ApplyStep[],
    live: readonly KubeObject[],
    held: readonly ResourceIdentity[],
    upgrades?: UpgradeChains,
  ): Promise<GatedSteps>;
  orderPrunes(
    opened: OpenedRollout | undefined,
    candidates: readonly PruneCandidate[],
    live: readonly KubeObject[],
  ): PruneCandidate[];
  finish(
    opened: OpenedRollout | undefined,
    gated: GatedSteps,
    live: readonly KubeObject[],
    prunes: readonly PruneCandidate[],
  ): Promise<RolloutReport | undefined>;
}

export interface SyncEdges {
  hub: MirrorHub;
  placements: SyncPlacements;
  rollout?: SyncRollout;
  /**
   * The releases the CRs install, for the settings check (src/render/settings-check.ts); without them the
   * check is not run (tests of the mirror alone).
   */
  releases?: ReleaseLoader;
}

export interface SyncSettings {
  fleet: FleetSettings;
  /** The only directory local manifest paths may point into (the service's kodata). */
  kodataDir: string | undefined;
}

/** The first two steps: the fleet model of a commit's files, placements expanded against the inventory. */
export function expandedModel(
  files: readonly FleetFile[],
  settings: FleetSettings,
  inventory: Inventory,
): PlacementSync {
  const model = buildFleetModel(files, { defaultNamespace: settings.defaultNamespace });
  const { namespaces } = settings.access;
  return expandForSync(model, inventory, namespaces ? { allowedNamespaces: namespaces } : {});
}

/**
 * Mirrors one commit into the hub. A CR the hub or the admission refuses is reported on its own, and
 * keeps the prune from running; only failing to read the hub fails the sync.
 */
export async function sync(
  commit: { source: MirrorSource; files: readonly FleetFile[] },
  settings: SyncSettings,
  edges: SyncEdges,
): Promise<SyncResult> {
  const { source } = commit;
  const { fleet } = settings;
  const rollout = edges.rollout ?? NO_ROLLOUT;
  const admission = hubCrPolicy(fleet, settings.kodataDir);
  // 1. The fleet model, its placements expanded against the inventory.
  const expanded = expandedModel(commit.files, fleet, edges.placements.inventory());
  // 2. The rollout gate's policy, state and key; then the hub's CRs and the prune confirmation.
  const opened = await rollout.open(expanded.model, source.commit);
  const { live, confirmation } = await edges.hub.read();
  // 2b. The settings check against the releases the CRs install (the hub's CRs say what runs now).
  const checked: { model: FleetModel; warnings?: Diagnostic[] } = edges.releases
    ? await checkSettings(expanded.model, commit.files, edges.releases, live)
    : { model: expanded.model };
  // 2c. A version several minors ahead of a hub CR's becomes the next step of its upgrade chain; a sync
  // without a rollout edge (plan) shows the step a chain at rest would take next.
  const memory = edges.rollout
    ? upgradeMemory(opened !== undefined, opened?.state)
    : upgradeMemory(true, undefined);
  const available = edges.releases && (await releasedVersions(edges.releases));
  const upgrades = chainUpgrades(checked.model.resources, live, {
    ...memory,
    ...(available && { available }),
  });
  const model = { ...checked.model, resources: upgrades.resources };
  // 3. What to apply: admission, ownership, create, update or leave.
  const planned = decideApplies(model.resources, source, live, admission);
  // 4. The CRs of clusters that left a placement, kept within their grace period.
  const departures = edges.placements.hold(expanded, live, source.repository);
  // 5. Which changes go out now, which wait for their wave, what is put back (the state stored first).
  const gated = await rollout.gate(opened, planned, live, departures.held, upgrades);
  // 6. Write what goes out.
  const resources = await write(edges.hub, gated.steps, admission);
  // 7. What to prune, behind the safeguards, in reverse wave order; delete it.
  const decided = decidePrune(
    { model, source, options: fleet.prune, namespace: fleet.defaultNamespace },
    live,
    {
      applyFailures: resources.filter((outcome) => outcome.error !== undefined).length,
      confirmedToken: confirmedToken(confirmation),
      held: departures.held,
    },
  );
  const ordered =
    decided.state === "pruned"
      ? { ...decided, candidates: rollout.orderPrunes(opened, decided.candidates, live) }
      : decided;
  const prune = ordered.state === "pruned" ? await deletePrunes(edges.hub, ordered) : ordered;
  // 8. Record a prune held for a person; mark the CRs that wait, and the rollout's Events.
  await edges.hub.recordHeldPrune(prune, confirmation);
  const report = await rollout.finish(opened, gated, live, prune.candidates);
  return {
    source,
    model,
    resources,
    prune,
    diagnostics: model.diagnostics,
    ...(checked.warnings && { warnings: checked.warnings }),
    failedFiles: model.files.filter((file) => file.status === "failed"),
    placements: { selections: expanded.selections, departures: departures.departures },
    ...(upgrades.crs.length > 0 && { upgrades: upgrades.crs }),
    ...(report && { rollout: report }),
  };
}

/**
 * The settings check of every CR (src/render/settings-check.ts), the version each runs now read from its
 * hub CR's status (for the upgrade warnings). A CR whose settings have an error fails its file, as any
 * error in a file does: the file's CRs keep their last good state on the hub, nothing is pruned (the
 * invalid-files safeguard), and the error reaches the status file at file:line. That is the service doing
 * what validate and plan say, rather than a refusal at reconcile that only the CR's condition would show.
 * A placement file's departures are left as they were decided: a setting does not change what it selects.
 */
async function checkSettings(
  model: FleetModel,
  files: readonly FleetFile[],
  releases: ReleaseLoader,
  live: readonly KubeObject[],
): Promise<{ model: FleetModel; warnings: Diagnostic[] }> {
  const running = new Map(
    live.flatMap((object) => {
      const version = (object.status as { version?: unknown } | undefined)?.version;
      return typeof version === "string" && version !== ""
        ? [[formatIdentity(identityOf(object)), version]]
        : [];
    }),
  );
  const found = await checkFleetSettings(model.resources, files, releases, (resource) =>
    running.get(formatIdentity(identityOf(resource))),
  );
  const errors = found.filter(isError);
  const warnings = found.filter((diagnostic) => !isError(diagnostic));
  if (errors.length === 0) return { model, warnings };
  const failed = new Set(errors.map((diagnostic) => diagnostic.path));
  const diagnostics = boundedDiagnostics([...model.diagnostics, ...errors]);
  return {
    model: {
      ...model,
      resources: model.resources.filter((desired) => !failed.has(desired.path)),
      diagnostics,
      omittedDiagnostics:
        model.omittedDiagnostics + model.diagnostics.length + errors.length - diagnostics.length,
      files: model.files.map((file) => (failed.has(file.path) ? { ...file, status: "failed" } : file)),
    },
    warnings,
  };
}

/** The releases there are of each kind, for the upgrade chains; none when they cannot be listed. */
async function releasedVersions(releases: ReleaseLoader): Promise<Record<string, readonly string[]>> {
  const versions = (kind: KnativeKind) =>
    releases.availableVersions(COMPONENT_OF_KIND[kind]).catch((): string[] => []);
  return Object.fromEntries(
    await Promise.all(KNATIVE_KINDS.map(async (kind) => [kind, await versions(kind)])),
  );
}

/** Without a rollout policy's stage every change is made at once, in no particular order. */
const NO_ROLLOUT: SyncRollout = {
  open: async () => undefined,
  gate: async (_opened, steps) => ({ steps: [...steps], revertEvents: [] }),
  orderPrunes: (_opened, candidates) => [...candidates],
  finish: async () => undefined,
};

/**
 * The hub writes of a sync that run at once: a placement over a thousand clusters creates a thousand CRs,
 * one server-side apply each, and one after another they took minutes on a busy hub.
 */
const HUB_WRITES_AT_ONCE = 8;

/**
 * Applies the creates and updates the gate lets through, in no order (each is its own CR), the outcomes in
 * the steps' order. What it lets through is admitted again: a revert is read from an older commit, and
 * today's rules hold.
 */
async function write(
  hub: MirrorHub,
  steps: readonly ApplyStep[],
  admission: ReturnType<typeof hubCrPolicy>,
): Promise<ResourceOutcome[]> {
  return mapInParallel(steps, HUB_WRITES_AT_ONCE, async (step): Promise<ResourceOutcome> => {
    if (step.action !== "create" && step.action !== "update") return step;
    const { object, ...outcome } = step;
    const refusal = admitHubObject(object, admission);
    if (refusal) {
      const error = `${outcome.path}: ${refusal.field}: ${refusal.message}`;
      return { ...outcome, action: "refused", error };
    }
    return { ...outcome, ...(await attempt(() => hub.apply(object))) };
  });
}

/** Deletes the candidates that do not wait; the hub controller's finalizer then uninstalls each. */
async function deletePrunes(hub: MirrorHub, report: PruneReport): Promise<PruneReport> {
  const candidates: PruneCandidate[] = [];
  for (const candidate of report.candidates) {
    candidates.push(
      candidate.waiting === undefined
        ? { ...candidate, ...(await attempt(() => hub.delete(candidate))) }
        : candidate,
    );
  }
  return { ...report, candidates };
}

/** Runs one write; a refusal becomes the CR's error instead of failing the whole sync. */
async function attempt(write: () => Promise<unknown>): Promise<{ error?: string }> {
  try {
    await write();
    return {};
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}
