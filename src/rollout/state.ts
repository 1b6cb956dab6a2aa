import { z } from "zod";

// The rollout's state, kept on the hub (a ConfigMap in knative-fleet's namespace) so a new leader carries on
// where the last one stopped: which revision rolls out, the open wave, when each CR was let through, why it
// halted, and per CR the last content that was healthy on its cluster (what halt-and-revert goes back to).

export const ROLLOUT_STATE_CONFIGMAP = "knative-fleet-rollout";
export const ROLLOUT_STATE_KEY = "state";

const HubContentSchema = z.object({
  labels: z.record(z.string(), z.string()).optional(),
  annotations: z.record(z.string(), z.string()).optional(),
  spec: z.record(z.string(), z.unknown()),
});
export type HubContent = z.infer<typeof HubContentSchema>;

export const LastHealthySchema = z.object({
  /** The commit the content came from. */
  commit: z.string(),
  /** Its desired-hash annotation: whether the hub CR holds it now. */
  hash: z.string(),
  content: HubContentSchema,
});
export type LastHealthy = z.infer<typeof LastHealthySchema>;

export const HaltSchema = z.object({
  wave: z.string(),
  waveIndex: z.number().int().min(0),
  /** The first CR that failed, as `Kind namespace/name`, and its cluster. */
  resource: z.string(),
  cluster: z.string(),
  /** The first failing reason: the CR's blocking condition. */
  reason: z.string(),
  at: z.string(),
});
export type Halt = z.infer<typeof HaltSchema>;

export const RolloutStateSchema = z.object({
  /** The digest of every desired CR: a new commit that changes no CR is the same revision. */
  revision: z.string(),
  /** The first commit seen with this content. */
  commit: z.string(),
  startedAt: z.string(),
  phase: z.enum(["Progressing", "Complete", "Halted"]),
  /** The open (or next to open) wave. */
  wave: z.number().int().min(0),
  /** The name of that wave, for people reading the state. */
  waveName: z.string().optional(),
  waveOpenedAt: z.string().optional(),
  /** When every CR let through in the open wave was last seen healthy without a break: the soak's start. */
  healthySince: z.string().optional(),
  /** The CRs let through for this revision, and when. */
  released: z.record(z.string(), z.string()),
  halt: HaltSchema.optional(),
  lastHealthy: z.record(z.string(), LastHealthySchema),
  /** Timestamps of the waves, for people: when each opened and completed. */
  history: z.array(z.object({ wave: z.string(), opened: z.string().optional(), completed: z.string() })),
});
export type RolloutState = z.infer<typeof RolloutStateSchema>;

/** The stored state, or undefined when there is none or it cannot be read (the rollout starts over, safely). */
export function readRolloutState(text: string | undefined): RolloutState | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = RolloutStateSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** One line for `knative-fleet status`: the revision, where it is, and for a halt where and why. */
export function describeRollout(state: RolloutState): string {
  const revision = `revision ${state.commit.slice(0, 12)}`;
  if (state.phase === "Halted" && state.halt) {
    const { wave, resource, cluster, reason } = state.halt;
    return `Rollout: ${revision} HALTED in wave ${wave}: ${resource} on ${cluster}: ${reason}`;
  }
  if (state.phase === "Complete") return `Rollout: ${revision} has reached every wave`;
  const wave = state.waveName ?? `#${state.wave + 1}`;
  return `Rollout: ${revision} in progress, wave ${wave}${state.waveOpenedAt ? "" : " (waiting to open)"}`;
}
