import { admitHubObject } from "../admission/hub-cr.ts";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../api/knative.ts";
import { CONFIRM_PRUNE_ANNOTATION, PRUNE_CONFIRMATION_CONFIGMAP } from "../api/labels.ts";
import type { Diagnostic } from "../fleet/diagnostic.ts";
import type { FileResult } from "../fleet/model.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import {
  decideApplies,
  decidePrune,
  HELD_PRUNE_KEY,
  heldPruneRecord,
  type MirrorInput,
  type MirrorSource,
  type PruneReport,
  type ResourceOutcome,
} from "./decide.ts";

/** What one sync did, for the service loop's log and the status summary. */
export interface MirrorResult {
  source: MirrorSource;
  /** Every desired CR, by kind, namespace and name. */
  resources: ResourceOutcome[];
  prune: PruneReport;
  /** The fleet files' errors. */
  diagnostics: Diagnostic[];
  /** The files that failed validation, with the CRs they declare: those keep their last good state. */
  failedFiles: FileResult[];
}

/**
 * Mirrors the fleet model of one commit into the hub: server-side applies each desired CR whose content
 * changed, leaves hand-made CRs alone, then prunes behind the safeguards of `decidePrune`. A CR the hub
 * refuses is reported on its own; only a failure to read the hub fails the sync.
 */
export async function mirror(hub: KubeClient, input: MirrorInput): Promise<MirrorResult> {
  const [live, confirmation] = await Promise.all([
    listHubResources(hub),
    hub.get("v1", "ConfigMap", input.namespace, PRUNE_CONFIRMATION_CONFIGMAP),
  ]);
  const confirmedToken = confirmation?.metadata.annotations?.[CONFIRM_PRUNE_ANNOTATION];
  const resources: ResourceOutcome[] = [];
  const planned = decideApplies(input.model.resources, input.source, live, input.admission);
  const held = input.hold?.(live) ?? [];
  for (const step of input.gate ? await input.gate.applies(planned, live, held) : planned) {
    if (step.action === "create" || step.action === "update") {
      const { object, ...outcome } = step;
      // What the gate lets through is admitted too: a revert is read from an older commit, and today's rules hold.
      const refusal = admitHubObject(object, input.admission);
      if (refusal) {
        const error = `${outcome.path}: ${refusal.field}: ${refusal.message}`;
        resources.push({ ...outcome, action: "refused", error });
        continue;
      }
      resources.push({ ...outcome, ...(await attempt(() => hub.apply(object))) });
    } else {
      resources.push(step);
    }
  }
  const applyFailures = resources.filter((outcome) => outcome.error !== undefined).length;
  const pruneDecision = decidePrune(input, live, { applyFailures, confirmedToken, held });
  const ordered =
    input.gate && pruneDecision.state === "pruned"
      ? { ...pruneDecision, candidates: input.gate.prunes(pruneDecision.candidates, live) }
      : pruneDecision;
  const prune = ordered.state === "pruned" ? await deleteCandidates(hub, ordered) : ordered;
  await recordHeldPrune(hub, input.namespace, prune, confirmation);
  return {
    source: input.source,
    resources,
    prune,
    diagnostics: input.model.diagnostics,
    failedFiles: input.model.files.filter((file) => file.status === "failed"),
  };
}

/** The KnativeServing and KnativeEventing CRs on the hub, in every namespace, mirrored or not. */
export async function listHubResources(hub: KubeClient): Promise<KubeObject[]> {
  const lists = await Promise.all(KNATIVE_KINDS.map((kind) => hub.list(OPERATOR_API_VERSION, kind)));
  return lists.flatMap((list) => list.items);
}

/**
 * A held prune is written on the prune-confirmation ConfigMap (data key `held`), where a person confirms it
 * and `knative-fleet status` reads it; removed once nothing is held. Written only when it changes.
 */
async function recordHeldPrune(
  hub: KubeClient,
  namespace: string,
  prune: PruneReport,
  configMap: KubeObject | undefined,
): Promise<void> {
  const held = heldPruneRecord(prune);
  const have = (configMap?.data as Record<string, string> | undefined)?.[HELD_PRUNE_KEY];
  if (held === have || (held === undefined && configMap === undefined)) return;
  await hub.apply({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: PRUNE_CONFIRMATION_CONFIGMAP, namespace },
    data: held === undefined ? {} : { [HELD_PRUNE_KEY]: held },
  });
}

/** Deletes the candidates; the hub controller's finalizer then uninstalls each from its cluster. */
async function deleteCandidates(hub: KubeClient, report: PruneReport): Promise<PruneReport> {
  const candidates = [];
  for (const candidate of report.candidates) {
    if (candidate.waiting !== undefined) {
      candidates.push(candidate);
      continue;
    }
    const { kind, namespace, name } = candidate;
    candidates.push({
      ...candidate,
      ...(await attempt(() => hub.delete(OPERATOR_API_VERSION, kind, namespace, name))),
    });
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
