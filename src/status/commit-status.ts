import { isManagedByFleet } from "../api/labels.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { formatIdentity } from "../fleet/identity.ts";
import type { KubeObject } from "../kube/object.ts";
import { rolloutVerdict } from "../rollout/state.ts";
import { type HubCrRow, hubCrRow } from "./row.ts";
import type { StatusSync } from "./summary.ts";

// The commit statuses a sync asks of the Git host, pure: one per cluster (`<prefix>/<fleet>/<namespace>/
// <name>`) and one for the fleet (`<prefix>/<fleet>`), on the commit the rollout started at (without a
// rollout policy, the synced commit). Read off the same hub CRs and sync report as the status files, so the
// merged commit, the status README and `knative-fleet status` never disagree. No time in them: an unchanged
// fleet asks for the same statuses, and the writer sends nothing.

/** What a status says. `superseded` is the writer's, for a pending status a newer commit replaced. */
export type CommitState = "pending" | "success" | "failure" | "superseded";

export interface CommitStatus {
  commit: string;
  context: string;
  state: CommitState;
  /** One line, at most DESCRIPTION_LIMIT characters (GitHub's limit; Gitea and GitLab take as many). */
  description: string;
}

export const COMMIT_STATUS_PREFIX = "knative-fleet";
export const DESCRIPTION_LIMIT = 140;

export interface CommitStatusOptions {
  /** The fleet's name in the contexts, so two hubs reporting on one repository never overwrite each other. */
  fleet: string;
  /** Above this many clusters only the fleet's status is sent, with the counts (a Git host caps contexts). */
  maxClusters: number;
}

interface ClusterVerdict {
  state: Exclude<CommitState, "superseded">;
  description: string;
}

/**
 * The statuses a sync asks for, in the order they are posted: each cluster's by name, then the fleet's. The
 * whole after its parts: whoever sees the fleet's status change finds the clusters' it sums up already sent.
 */
export function commitStatuses(
  input: { resources: readonly KubeObject[]; sync: StatusSync },
  options: CommitStatusOptions,
): CommitStatus[] {
  const { sync } = input;
  const rollout = sync.rollout;
  const commit = rollout?.commit || sync.source.commit;
  const rows = input.resources.filter(isManagedByFleet).map(hubCrRow);
  const waiting = new Map(
    sync.resources.flatMap((o) => (o.action === "waiting" ? [[formatIdentity(o), o.reason ?? ""]] : [])),
  );
  const failed = new Map(
    sync.resources.flatMap((o) => (o.error === undefined ? [] : [[formatIdentity(o), o.error]])),
  );
  const byCluster = new Map<string, HubCrRow[]>();
  for (const row of rows) {
    if (row.cluster === "hub") continue;
    byCluster.set(row.cluster, [...(byCluster.get(row.cluster) ?? []), row]);
  }
  const clusters = [...byCluster.keys()].sort(compareStrings);
  const verdicts = clusters.map((cluster) => {
    const crs = byCluster.get(cluster)!;
    return { cluster, ...clusterVerdict(crs, { sync, waiting, failed, cluster }) };
  });
  const context = `${COMMIT_STATUS_PREFIX}/${options.fleet}`;
  const fleet = fleetVerdict(verdicts, sync, waiting.size - countWaitingOn(rows, waiting));
  const statuses: CommitStatus[] =
    verdicts.length <= options.maxClusters
      ? verdicts.map((v) => ({
          commit,
          context: `${context}/${v.cluster}`,
          state: v.state,
          description: v.description,
        }))
      : [];
  statuses.push({ commit, context, ...fleet });
  return statuses.map((s) => ({ ...s, description: oneLine(s.description) }));
}

/** Waiting creates have no hub CR (and so no cluster yet): counted in the fleet's status only. */
const countWaitingOn = (rows: readonly HubCrRow[], waiting: ReadonlyMap<string, string>): number =>
  rows.filter((row) => waiting.has(formatIdentity(row))).length;

function clusterVerdict(
  crs: readonly HubCrRow[],
  at: {
    sync: StatusSync;
    waiting: ReadonlyMap<string, string>;
    failed: ReadonlyMap<string, string>;
    cluster: string;
  },
): ClusterVerdict {
  const { sync, waiting, failed, cluster } = at;
  const rollout = sync.rollout;
  const halt = rollout?.phase === "Halted" ? rollout.halt : undefined;
  if (halt !== undefined && halt.cluster === cluster) {
    return { state: "failure", description: `halted in wave ${halt.wave}: ${halt.resource}: ${halt.reason}` };
  }
  const refused = crs.find((row) => failed.has(formatIdentity(row)));
  if (refused) {
    return {
      state: "failure",
      description: `${refused.kind} not applied: ${failed.get(formatIdentity(refused))}`,
    };
  }
  const held = crs.find((row) => waiting.has(formatIdentity(row)));
  if (held) {
    const reason = waiting.get(formatIdentity(held)) || "waits for its wave";
    return { state: "pending", description: halt ? `held: the rollout halted in wave ${halt.wave}` : reason };
  }
  // Without a policy nothing decides a halt: a failed CR is the outcome. With one, the gate decides (its
  // time limit), and the status says failure when it halts.
  const broken = crs.find((row) => row.phase === "Failed");
  if (broken && rollout === undefined) {
    return {
      state: "failure",
      description: `${broken.kind}: ${broken.message ?? broken.reason ?? "failed"}`,
    };
  }
  const unready = crs.find((row) => row.phase !== "Current");
  if (unready) {
    const why = unready.message ?? unready.reason ?? unready.phase;
    return { state: "pending", description: `${unready.kind} not ready: ${why}` };
  }
  if (rollout !== undefined && rollout.phase !== "Complete") {
    // Healthy is not done: success once the cluster's wave has soaked (the rollout's history says so).
    const wave = rollout.clusterWaves?.[cluster];
    const done = wave !== undefined && rollout.history.some((h) => h.wave === wave);
    if (!done) {
      const why =
        rollout.phase === "Progressing" && wave !== undefined
          ? `healthy; wave ${wave} not done yet`
          : `healthy; ${rolloutVerdict(rollout).message}`;
      return { state: "pending", description: why };
    }
  }
  const versions = [
    ...new Set(crs.map((row) => [row.kind.replace(/^Knative/, ""), row.version].filter(Boolean).join(" "))),
  ].sort(compareStrings);
  return { state: "success", description: `healthy: ${versions.join(", ")}` };
}

function fleetVerdict(
  verdicts: readonly (ClusterVerdict & { cluster: string })[],
  sync: StatusSync,
  waitingCreates: number,
): ClusterVerdict {
  const count = (state: ClusterVerdict["state"]) => verdicts.filter((v) => v.state === state).length;
  const [failures, pendings, successes] = [count("failure"), count("pending"), count("success")];
  const tally = `${successes}/${verdicts.length} clusters healthy`;
  const rollout = sync.rollout;
  const verdict = rollout ? `; ${rolloutVerdict(rollout).message}` : "";
  const creates = waitingCreates > 0 ? `; ${waitingCreates} new CRs wait` : "";
  const text = `${tally}${creates}${verdict}`;
  if (failures > 0 || rollout?.phase === "Halted") return { state: "failure", description: text };
  if (pendings > 0 || waitingCreates > 0 || (rollout !== undefined && rollout.phase !== "Complete"))
    return { state: "pending", description: text };
  return { state: "success", description: text };
}

/** One line within the limit: a Git host refuses a longer description. */
function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length <= DESCRIPTION_LIMIT ? line : `${line.slice(0, DESCRIPTION_LIMIT - 1)}…`;
}
