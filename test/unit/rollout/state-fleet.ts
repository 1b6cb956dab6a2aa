import { createHash, createHmac } from "node:crypto";
import {
  ROLLOUT_STATE_MAC_KEY,
  ROLLOUT_STATE_PREVIOUS_KEY,
  type RolloutState,
  RolloutStateSchema,
  stateText,
} from "../../../src/rollout/state.ts";

// The rollout state of a big fleet, for the tests of its size and of its stored form (state-size.test.ts,
// state-packing.test.ts): every CR mid-rollout with every optional field set, the worst case.

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

/** A commit id, 40 hexadecimal digits. */
export const commitOf = (name: string): string => sha256(`commit ${name}`).slice(0, 40);

const REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2", "sa-east-1", "eu-central-1"];
const TEAMS = ["payments", "search", "checkout", "identity"];
const PLACEMENTS = ["serving-prod", "eventing-prod", "serving-edge"];

/**
 * A cluster's name of 63 characters (a DNS label's most): `prod-<region>-<team>-cluster-<n>-` and hex
 * digits, as fleets that name clusters by generated ids have.
 */
export const clusterName = (i: number): string =>
  `prod-${REGIONS[i % REGIONS.length]}-${TEAMS[i % TEAMS.length]}-cluster-${String(i).padStart(5, "0")}-${sha256(`cluster ${i}`)}`.slice(
    0,
    63,
  );

/** The key of the CR `i`: a Serving or an Eventing of one of three placements, on the cluster `i`. */
const crKey = (i: number): string =>
  `${i % 2 === 0 ? "KnativeServing" : "KnativeEventing"} knative-serving-${PLACEMENTS[i % PLACEMENTS.length]}/${clusterName(i)}`;

/** `at` plus `ms` milliseconds, as an ISO time. */
const after = (at: string, ms: number) => new Date(Date.parse(at) + ms).toISOString();

const STARTED = "2026-11-29T10:00:00.000Z";

export interface FleetStateOptions {
  /** Digits of each content digest: 64 (a whole sha256, the most the schema takes) or 32 (the mirror's). */
  hashDigits?: number;
  /** The first CR's number, to make states of other CRs. */
  from?: number;
}

/**
 * A halted rollout of `n` CRs, each on a cluster of its own (no cluster name shared), a Serving or an
 * Eventing of one of three placements: each has a target (one of three commits that changed it), a baseline,
 * its cluster, its release, its health and a failed revert; every release and health time is its own.
 */
export function midRolloutState(n: number, options: FleetStateOptions = {}): RolloutState {
  const { hashDigits = 64, from = 0 } = options;
  const crs: RolloutState["crs"] = {};
  for (let i = from; i < from + n; i++) {
    const cluster = clusterName(i);
    const target = sha256(`target ${i}`).slice(0, hashDigits);
    const baseline = sha256(`baseline ${i}`).slice(0, hashDigits);
    crs[crKey(i)] = {
      target: { hash: target, commit: commitOf(`change ${i % 3}`), version: "1.22.3" },
      baseline: { hash: baseline, commit: commitOf("last release"), version: "1.21.7" },
      cluster: { namespace: "fleet-system", name: cluster },
      released: { hash: target, at: after(STARTED, 60_000 + i * 1_013) },
      health: { hash: target, healthy: i % 7 !== 0, since: after(STARTED, 90_000 + i * 997) },
      revertFailed: baseline,
    };
  }
  return RolloutStateSchema.parse({
    schema: 2,
    phase: "Halted",
    commit: commitOf("change 0"),
    startedAt: STARTED,
    waveName: "remaining",
    waves: {
      canary: { opened: STARTED, completed: after(STARTED, 600_000) },
      early: { opened: after(STARTED, 600_000), completed: after(STARTED, 3_600_000) },
      remaining: { opened: after(STARTED, 3_600_000) },
    },
    halt: {
      wave: "remaining",
      waveIndex: 2,
      resource: crKey(from),
      cluster: `fleet-system/${clusterName(from)}`,
      hash: sha256(`target ${from}`).slice(0, hashDigits),
      commit: commitOf("change 0"),
      reason: "DeploymentsAvailable: waiting for deployments: activator, autoscaler, controller, webhook",
      at: after(STARTED, 4_000_000),
    },
    crs,
    upgrades: { "KnativeServing 1.22": "1.22.3" },
  });
}

/**
 * The ConfigMap data the previous release stored for `state`: its JSON as it is, sealed with `previous`
 * (or, `previous` undefined, as the release before the chain sealed it).
 */
export function sealedByPreviousRelease(
  state: RolloutState,
  key: Uint8Array,
  binding: string,
  previous: string | undefined,
): Record<string, string> {
  const text = stateText(state);
  return {
    state: text,
    ...(previous !== undefined && { [ROLLOUT_STATE_PREVIOUS_KEY]: previous }),
    [ROLLOUT_STATE_MAC_KEY]: macOf(key, binding, text, previous),
  };
}

/** The seal's HMAC, computed as the release before this change did: binding, predecessor, text. */
export function macOf(key: Uint8Array, binding: string, text: string, previous: string | undefined): string {
  const hmac = createHmac("sha256", key).update(binding).update("\n");
  if (previous !== undefined) hmac.update(`previous ${previous}\n`);
  return hmac.update(text).digest("hex");
}
