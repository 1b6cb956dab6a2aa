import { ConditionType, findCondition, readinessOf } from "../api/conditions.ts";
import { describeRecord, summary } from "../api/drift.ts";
import { type Condition, KNATIVE_KINDS, type KnativeStatus, OPERATOR_API_VERSION } from "../api/knative.ts";
import {
  ABANDON_CLEANUP_ANNOTATION,
  CONFIRM_PRUNE_ANNOTATION,
  PRUNE_CONFIRMATION_CONFIGMAP,
  ROLLOUT_REFUSED_ANNOTATION,
  ROLLOUT_WAITING_ANNOTATION,
} from "../api/labels.ts";
import { formatIdentity, type ResourceIdentity } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { KubeObject } from "../kube/object.ts";
import { KubeApiError } from "../kube/rest.ts";
import { HELD_PRUNE_KEY, type HeldPrune, HeldPruneSchema } from "../mirror/decide.ts";
import {
  approvalVerdict,
  describeRollout,
  peekRolloutState,
  ROLLOUT_STATE_CONFIGMAP,
  type RolloutView,
  rolloutViewOf,
} from "../rollout/state.ts";
import { compareRows, type HubCrRow, hubCrRow, versionText } from "../status/row.ts";
import { shortCommit } from "../text/commit.ts";
import { escapeControlCharacters } from "../text/escape.ts";
import { commandSettings } from "./access-settings.ts";
import { type Command, type CommandContext, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK } from "./command.ts";
import { HUB_FLAGS_HELP, HUB_OPTIONS, hubClient } from "./hub.ts";
import { hubErrorText } from "./hub-error.ts";
import {
  type Column,
  LISTING_FORMATS,
  type ListingFormat,
  OUTPUT_OPTION,
  outputFormat,
  renderColumns,
  renderData,
} from "./output.ts";

export const statusCommand: Command = {
  name: "status",
  summary: "Show the fleet's KnativeServing/KnativeEventing CRs and their conditions from the hub",
  usage: `Usage: knative-fleet status [flags]

Lists every KnativeServing and KnativeEventing CR on the hub, one row each: its target cluster, Ready, the
installed version and its status: Current, InProgress, Failed or Terminating (the verdict the status file
and the rollout gate read too) and what holds it back (the first condition that is not True); -o wide adds whether the
controller has caught up with its spec, the fleet file and commit it came from, and its newest drift (a change
someone else made on its cluster, kept in report mode or put back; docs/drift.md). A CR being deleted says so.
With --drift, each CR's last drift records follow in full: the fields, who changed them and when, and the CR
field and fleet-file line to edit instead.
With a rollout policy, a line says where the current rollout is, and for a halt which wave, CR and cluster
halted it and why (docs/rollout.md). With a prune held for a person's confirmation (more than
maxPruneFraction of the CRs), a line names the CRs and gives the command that confirms it.
With -w, it prints the listing again whenever a CR changes, until interrupted (Ctrl-C).
Exit code 0 when every CR is Current, 1 when any is not (or is stale, or being deleted, or the rollout is
halted or its state refused, or a prune waits for confirmation), 2 when the hub cannot be read
(docs/cli.md#exit-codes). Drift alone does not change the exit code.

Flags:
${HUB_FLAGS_HELP}
  -n, --namespace NS                    only CRs in NS (default: all namespaces)
  -o, --output table|wide|json|yaml     output format (default table)
  -w, --watch                           print the listing again on every change
  --drift                               print each CR's drift records after the listing
  -h, --help                            show this help`,
  options: {
    ...HUB_OPTIONS,
    namespace: { type: "string", short: "n" },
    ...OUTPUT_OPTION,
    watch: { type: "boolean", short: "w" },
    drift: { type: "boolean" },
  },
  outputFormats: LISTING_FORMATS,
  allowPositionals: false,
  async run(args, ctx) {
    const output = outputFormat(args.values.output, LISTING_FORMATS);
    const hub = hubClient(args);
    const namespace = args.values.namespace as string | undefined;
    let objects: KubeObject[];
    try {
      objects = await listKnativeResources(hub, namespace);
    } catch (err) {
      ctx.stderr.write(`knative-fleet status: ${listErrorText(hub.rest.server, err)}\n`);
      return EXIT_ERROR;
    }
    const listing = await readListing(hub, namespace, objects);
    const shown: Shown = { output, drift: args.values.drift === true };
    ctx.stdout.write(renderListing(listing, shown));
    if (args.values.watch !== true) return listingExitCode(listing);
    return watchListing(hub, namespace, shown, listing, ctx);
  },
};

/** What one `status` prints: the CRs' rows, the rollout's state and a prune that waits for a person. */
interface Listing {
  rows: StatusRow[];
  rollout: RolloutView | undefined;
  heldPrune: HeldPrune | undefined;
  /** knative-fleet's namespace, where the rollout state and the prune confirmation live. */
  fleetNamespace: string;
}

async function readListing(
  hub: KubeClient,
  namespace: string | undefined,
  objects: readonly KubeObject[],
): Promise<Listing> {
  // status takes no --config: the service's settings as plan and validate read them without one.
  const fleetNamespace = namespace ?? commandSettings(undefined).settings.defaultNamespace;
  const [rollout, heldPrune] = await Promise.all([
    readRollout(hub, fleetNamespace, objects),
    readHeldPrune(hub, fleetNamespace),
  ]);
  return { rows: statusRows(objects), rollout, heldPrune, fleetNamespace };
}

/** How the listing is printed: -o, and --drift (each CR's drift records after the table). */
interface Shown {
  output: ListingFormat;
  drift: boolean;
}

function renderListing({ rows, rollout, heldPrune, fleetNamespace }: Listing, shown: Shown): string {
  return (
    renderData(shown.output, rows) ??
    `${renderStatusTable(rows, shown.output === "wide")}${rollout ? `${describeRollout(rollout)}\n` : ""}${
      heldPrune ? describeHeldPrune(heldPrune, fleetNamespace) : ""
    }${shown.drift ? renderDriftRecords(rows) : ""}`
  );
}

// Drift is not in the exit code: a change kept in report mode, or put back, leaves the CR as ready as it was.
const listingExitCode = ({ rows, rollout, heldPrune }: Listing): number =>
  rows.every(isSettled) &&
  rollout?.phase !== "Halted" &&
  rollout?.phase !== "Refused" &&
  heldPrune === undefined
    ? EXIT_OK
    : EXIT_FINDINGS;

/**
 * -w: the CRs watched (one informer per kind), the listing printed again whenever what it shows changed,
 * until the context's signal (or Ctrl-C/SIGTERM) ends it. Returns the exit code of the last listing.
 */
async function watchListing(
  hub: KubeClient,
  namespace: string | undefined,
  shown: Shown,
  first: Listing,
  ctx: CommandContext,
): Promise<number> {
  const signal = ctx.signal ?? interruption();
  let listing = first;
  let printed = renderListing(first, shown);
  const informers = KNATIVE_KINDS.map(
    (kind) => new Informer(hub, OPERATOR_API_VERSION, kind, () => {}, namespace),
  );
  let synced = false;
  let pending = false;
  const flush = async () => {
    pending = false;
    listing = await readListing(
      hub,
      namespace,
      informers.flatMap((informer) => informer.list()),
    );
    const text = renderListing(listing, shown);
    if (text === printed) return;
    printed = text;
    ctx.stdout.write(`${shown.output === "yaml" ? "---\n" : "\n"}${text}`);
  };
  const changed = () => {
    if (!synced || pending) return;
    pending = true;
    setImmediate(() => void flush());
  };
  for (const informer of informers) {
    informer.on(changed);
    informer.start();
  }
  await Promise.race([Promise.all(informers.map((informer) => informer.hasSynced())), aborted(signal)]);
  synced = true;
  changed();
  await aborted(signal);
  for (const informer of informers) informer.stop();
  return listingExitCode(listing);
}

/** A signal that Ctrl-C or SIGTERM aborts, so a watch ends with its exit code rather than a kill. */
function interruption(): AbortSignal {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return controller.signal;
}

const aborted = (signal: AbortSignal): Promise<void> =>
  signal.aborted
    ? Promise.resolve()
    : new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));

/**
 * The rollout's state on the hub, when the fleet has a rollout policy (and the caller may read it), or why
 * knative-fleet refuses the state it found there (it says so on the ConfigMap; this command holds no key).
 */
async function readRollout(
  hub: KubeClient,
  namespace: string,
  crs: readonly KubeObject[],
): Promise<RolloutView | undefined> {
  const configMap = await hub
    .get("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP)
    .catch(() => undefined);
  return rolloutOnHub(configMap, namespace, crs);
}

/**
 * The rollout as its state ConfigMap (in `namespace`) shows it to a reader without the key; the open wave
 * waits for an approval when the gate marked a hub CR with that wait (the state does not record it).
 */
export function rolloutOnHub(
  configMap: KubeObject | undefined,
  namespace: string,
  crs: readonly KubeObject[] = [],
): RolloutView | undefined {
  if (configMap === undefined) return undefined;
  const reason = configMap.metadata.annotations?.[ROLLOUT_REFUSED_ANNOTATION];
  if (reason !== undefined) {
    return { phase: "Refused", refused: { configMap: `${namespace}/${ROLLOUT_STATE_CONFIGMAP}`, reason } };
  }
  const state = peekRolloutState(configMap.data as Record<string, unknown> | undefined);
  if (state === undefined) return undefined;
  const view = rolloutViewOf(state);
  if (view.phase !== "Progressing" || view.wave === undefined || view.commit === undefined) return view;
  const approval = { wave: view.wave, commit: view.commit };
  const awaited = approvalVerdict(approval);
  return crs.some((cr) => cr.metadata.annotations?.[ROLLOUT_WAITING_ANNOTATION] === awaited)
    ? { ...view, approval }
    : view;
}

/** The prune that waits for a person's confirmation, as the service recorded it on the hub. */
async function readHeldPrune(hub: KubeClient, namespace: string): Promise<HeldPrune | undefined> {
  const configMap = await hub
    .get("v1", "ConfigMap", namespace, PRUNE_CONFIRMATION_CONFIGMAP)
    .catch(() => undefined);
  const text = (configMap?.data as Record<string, string> | undefined)?.[HELD_PRUNE_KEY];
  if (text === undefined) return undefined;
  try {
    const held = HeldPruneSchema.safeParse(JSON.parse(text));
    return held.success ? held.data : undefined;
  } catch {
    return undefined;
  }
}

function describeHeldPrune(held: HeldPrune, namespace: string): string {
  const more = held.count - held.candidates.length;
  return [
    `Prune HELD: ${held.message}: ${held.candidates.join(", ")}${more > 0 ? ` and ${more} more` : ""}.`,
    `  To delete them: kubectl -n ${namespace} annotate configmap ${PRUNE_CONFIRMATION_CONFIGMAP} --overwrite ${CONFIRM_PRUNE_ANNOTATION}=${held.token}`,
    "",
  ].join("\n");
}

async function listKnativeResources(hub: KubeClient, namespace: string | undefined): Promise<KubeObject[]> {
  const lists = await Promise.all(
    KNATIVE_KINDS.map((kind) => hub.list(OPERATOR_API_VERSION, kind, { namespace })),
  );
  return lists.flatMap((list) => list.items);
}

/** Why the hub could not be read (hub-error.ts), with a hint when the hub does not know the CRs' kinds. */
function listErrorText(server: string, err: unknown): string {
  const hint =
    err instanceof KubeApiError && err.reason === "NoKindMatch"
      ? " (are the knative-fleet CRDs installed on the hub?)"
      : "";
  return `${hubErrorText(server, err, "list the CRs")}${hint}`;
}

/**
 * One CR as `knative-fleet status` shows it: the status file's row (status/row.ts) and what a person at the
 * terminal needs besides. The JSON output holds them under `items`.
 */
export interface StatusRow extends HubCrRow {
  /** The Ready condition's status; Unknown until the controller has written one. */
  ready: Condition["status"];
  /** The first condition in install order that is not True, or Ready itself: what holds the CR back. */
  condition?: string;
  generation?: number;
  observedGeneration?: number;
  /** The controller has not reported on the current spec: the status describes an older one, or none. */
  stale: boolean;
  deleting?: Deletion;
}

interface Deletion {
  /** The finalizers still pending: the cleanup of the target cluster has not finished. */
  finalizers: string[];
  /**
   * The command that releases the CR without cleanup, offered when its cluster cannot be resolved (the
   * finalizer retries with backoff until then) and the CR does not carry the abandon annotation yet.
   */
  abandonCommand?: string;
}

/** The rows for the CRs listed from the hub, sorted by cluster, kind, namespace and name. */
export function statusRows(objects: readonly KubeObject[]): StatusRow[] {
  return objects.map(statusRow).sort(compareRows);
}

/** Current: Ready on the current spec with its Deployments available, and not being deleted. */
export const isSettled = (row: StatusRow): boolean => row.phase === "Current";

function statusRow(object: KubeObject): StatusRow {
  const { metadata } = object;
  const status = object.status as KnativeStatus | undefined;
  const read = readinessOf({ metadata, status });
  const row = hubCrRow(object);
  const { cluster, kind, namespace, name, phase, reason, message, version, upgradeTarget, path, commit } =
    row;
  // Field by field, in the order `-o json` and `-o yaml` have always printed them.
  return {
    cluster,
    kind,
    namespace,
    name,
    phase,
    reason,
    message,
    ready: read.ready,
    version,
    condition: read.blocking?.type,
    generation: metadata.generation as number | undefined,
    observedGeneration: status?.observedGeneration,
    stale: read.stale,
    path,
    commit,
    deleting: read.deleting ? deletion(object, row, status?.conditions ?? []) : undefined,
    upgradeTarget,
    drift: row.drift,
  };
}

function deletion(
  object: KubeObject,
  identity: ResourceIdentity,
  conditions: readonly Condition[],
): Deletion {
  const { metadata } = object;
  const unresolved = findCondition(conditions, ConditionType.TargetClusterResolved)?.status === "False";
  const abandoned = metadata.annotations?.[ABANDON_CLEANUP_ANNOTATION] === "true";
  return {
    finalizers: (metadata.finalizers as string[] | undefined) ?? [],
    abandonCommand:
      unresolved && !abandoned
        ? `kubectl -n ${identity.namespace} annotate ${identity.kind.toLowerCase()} ${identity.name} ${ABANDON_CLEANUP_ANNOTATION}=true`
        : undefined,
  };
}

const STATUS_COLUMNS: readonly Column<StatusRow>[] = [
  { header: "CLUSTER", cell: (row) => row.cluster },
  { header: "KIND", cell: (row) => row.kind },
  { header: "CR", cell: (row) => `${row.namespace}/${row.name}` },
  { header: "READY", cell: (row) => row.ready },
  { header: "VERSION", cell: (row) => versionText(row) ?? "-" },
  { header: "GENERATION", cell: generationCell, wide: true },
  { header: "SOURCE", cell: sourceCell, wide: true },
  { header: "DRIFT", cell: driftCell, wide: true },
  { header: "STATUS", cell: statusCell },
];

/**
 * The table `knative-fleet status` prints (with `wide`, -o wide's extra columns), the explanation last (it is
 * long), then, for each CR whose deletion is stuck on a cluster that cannot be reached, the command that
 * releases it.
 */
export function renderStatusTable(rows: readonly StatusRow[], wide = false): string {
  if (rows.length === 0) return "No KnativeServing or KnativeEventing CRs found.\n";
  const table = renderColumns(STATUS_COLUMNS, rows, wide);
  const hints = rows.flatMap((row) =>
    row.deleting?.abandonCommand
      ? [
          `${formatIdentity(row)} is being deleted, but its cluster ${row.cluster} cannot be reached to clean ` +
            `it up. If that cluster is gone for good, release the CR without cleanup:\n  ${row.deleting.abandonCommand}\n`,
        ]
      : [],
  );
  return [table, ...hints].join("\n");
}

/**
 * --drift: for each CR whose cluster drifted, its last records in full (newest first), one line each;
 * `No drift recorded.` when none did.
 */
export function renderDriftRecords(rows: readonly StatusRow[]): string {
  const blocks = rows.flatMap(({ drift, ...row }) =>
    drift
      ? [
          [
            `Drift on ${formatIdentity(row)} (cluster ${row.cluster}): ${
              drift.state === "kept" ? "a change is kept" : "the last change was put back"
            }`,
            ...drift.records.map((record) => `  ${escapeControlCharacters(describeRecord(record))}`),
          ].join("\n"),
        ]
      : [],
  );
  return `\n${blocks.length === 0 ? "No drift recorded." : blocks.join("\n\n")}\n`;
}

/** The newest drift record: `kept: ConfigMap knative-serving/config-autoscaler changed by kubectl-edit`. */
function driftCell({ drift }: StatusRow): string {
  const record = drift?.records[0];
  if (record === undefined) return "-";
  return `${record.outcome === "kept" ? "kept" : "put back"}: ${escapeControlCharacters(summary(record))}`;
}

/** `observed/generation`, e.g. `2/3 stale`; `-` for a generation the controller never observed. */
function generationCell({ observedGeneration, generation, stale }: StatusRow): string {
  return `${observedGeneration ?? "-"}/${generation ?? "-"}${stale ? " stale" : ""}`;
}

function sourceCell({ path, commit }: StatusRow): string {
  if (path === undefined && commit === undefined) return "-";
  return `${path ?? ""}${commit === undefined ? "" : `@${shortCommit(commit)}`}`;
}

/** The verdict: its phase (for a deletion, the finalizers it waits for), and why it is not Current. */
function statusCell({ phase, message, deleting }: StatusRow): string {
  const finalizers = deleting?.finalizers ?? [];
  const pending = finalizers.length > 0 ? ` (finalizer ${finalizers.join(", ")} pending)` : "";
  return `${phase}${pending}${message === undefined ? "" : `: ${message}`}`;
}
