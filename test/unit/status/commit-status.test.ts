import { describe, expect, it } from "vitest";
import type { Condition } from "../../../src/api/knative.ts";
import type { ResourceOutcome } from "../../../src/mirror/decide.ts";
import type { RolloutReport } from "../../../src/rollout/edge.ts";
import { commitStatuses, DESCRIPTION_LIMIT } from "../../../src/status/commit-status.ts";
import { rateLimitedUntil } from "../../../src/status/forge.ts";
import { haltOnC1, hubCr, mirrorResult, OLDER, ready } from "./hub-crs.ts";

const OPTIONS = { fleet: "prod", maxClusters: 50 };
const installing: Condition[] = [
  { type: "Ready", status: "Unknown", reason: "Installing", message: "waiting for webhook" },
];
const failing: Condition[] = [
  { type: "Ready", status: "False", reason: "InstallFailed", message: "image pull backoff" },
];

const rollout = (over: Partial<RolloutReport>): RolloutReport => ({
  phase: "Progressing",
  commit: OLDER,
  paused: false,
  waiting: 0,
  history: [],
  clusterWaves: { "fleet-system/c1": "canary", "fleet-system/c2": "prod" },
  ...over,
});

/** The sync's outcome for the CR of cluster `c`: waiting, or refused by the hub. */
const outcome = (cluster: string, action: "waiting" | "refused", why?: string): ResourceOutcome => ({
  kind: "KnativeServing",
  namespace: "knative-fleet",
  name: `${cluster}-serving`,
  path: `${cluster}.yaml`,
  action,
  ...(why !== undefined && (action === "waiting" ? { reason: why } : { error: why })),
});

const byContext = (statuses: ReturnType<typeof commitStatuses>) =>
  Object.fromEntries(
    statuses.map((s) => [s.context, `${s.state} @${s.commit.slice(0, 6)}: ${s.description}`]),
  );

describe("commit statuses", () => {
  it("without a policy: on the synced commit, one per cluster and the fleet's tally", () => {
    const resources = [
      hubCr("c1-serving", { cluster: "c1", version: "1.23.0", conditions: ready }),
      hubCr("c1-eventing", { kind: "KnativeEventing", cluster: "c1", version: "1.23.1", conditions: ready }),
      hubCr("c2-serving", { cluster: "c2", conditions: installing }),
      hubCr("c3-serving", { cluster: "c3", conditions: failing }),
      hubCr("on-hub", { conditions: ready }),
    ];
    expect(byContext(commitStatuses({ resources, sync: mirrorResult() }, OPTIONS))).toEqual({
      "knative-fleet/prod": "failure @012345: 1/3 clusters healthy",
      "knative-fleet/prod/fleet-system/c1": "success @012345: healthy: Eventing 1.23.1, Serving 1.23.0",
      "knative-fleet/prod/fleet-system/c2":
        "pending @012345: KnativeServing not ready: Ready=Unknown (Installing: waiting for webhook)",
      "knative-fleet/prod/fleet-system/c3":
        "failure @012345: KnativeServing: Ready=False (InstallFailed: image pull backoff)",
    });
  });

  it("with a policy: on the rollout's commit; a waiting cluster pends with why, healthy is success once its wave is done", () => {
    const resources = [
      hubCr("c1-serving", { cluster: "c1", version: "1.23.0", conditions: ready }),
      hubCr("c2-serving", { cluster: "c2", version: "1.22.0", conditions: ready }),
    ];
    const sync = mirrorResult({
      resources: [outcome("c2", "waiting", "wave prod waits for wave canary")],
      rollout: rollout({ wave: "canary", opened: true }),
    });
    const soaking = byContext(commitStatuses({ resources, sync }, OPTIONS));
    expect(soaking).toEqual({
      "knative-fleet/prod": expect.stringMatching(
        /^pending @fedcba: 0\/2 clusters healthy; rollout of fedcba/,
      ),
      "knative-fleet/prod/fleet-system/c1": "pending @fedcba: healthy; wave canary not done yet",
      "knative-fleet/prod/fleet-system/c2": "pending @fedcba: wave prod waits for wave canary",
    });
    const done = {
      ...sync,
      rollout: rollout({ history: [{ wave: "canary", completed: "2026-11-28T00:00:00Z" }] }),
    };
    expect(
      byContext(commitStatuses({ resources, sync: done }, OPTIONS))["knative-fleet/prod/fleet-system/c1"],
    ).toBe("success @fedcba: healthy: Serving 1.23.0");
    const complete = { ...mirrorResult(), rollout: rollout({ phase: "Complete" }) };
    expect(commitStatuses({ resources, sync: complete }, OPTIONS).map((s) => s.state)).toEqual([
      "success",
      "success",
      "success",
    ]);
  });

  it("a halt is a failure on its cluster with the reason, and the clusters it holds say so", () => {
    const resources = [
      hubCr("c1-serving", { cluster: "c1", conditions: failing }),
      hubCr("c2-serving", { cluster: "c2", version: "1.22.0", conditions: ready }),
    ];
    const halt = haltOnC1("image pull backoff");
    const sync = mirrorResult({
      resources: [outcome("c2", "waiting")],
      rollout: rollout({ phase: "Halted", halt }),
    });
    const statuses = byContext(commitStatuses({ resources, sync }, OPTIONS));
    expect(statuses["knative-fleet/prod/fleet-system/c1"]).toBe(
      "failure @fedcba: halted in wave canary: KnativeServing knative-fleet/c1-serving: image pull backoff",
    );
    expect(statuses["knative-fleet/prod/fleet-system/c2"]).toBe(
      "pending @fedcba: held: the rollout halted in wave canary",
    );
    expect(statuses["knative-fleet/prod"]).toMatch(
      /^failure @fedcba: 0\/2 clusters healthy; rollout of fedcba.* halted/,
    );
  });

  it("with a policy a failing CR pends until the gate halts (its time limit decides), and an apply error fails", () => {
    const resources = [
      hubCr("c1-serving", { cluster: "c1", conditions: failing }),
      hubCr("c2-serving", { cluster: "c2", conditions: ready }),
    ];
    const sync = mirrorResult({
      resources: [outcome("c2", "refused", "admission webhook denied")],
      rollout: rollout({}),
    });
    const statuses = byContext(commitStatuses({ resources, sync }, OPTIONS));
    expect(statuses["knative-fleet/prod/fleet-system/c1"]).toBe(
      "pending @fedcba: KnativeServing not ready: Ready=False (InstallFailed: image pull backoff)",
    );
    expect(statuses["knative-fleet/prod/fleet-system/c2"]).toBe(
      "failure @fedcba: KnativeServing not applied: admission webhook denied",
    );
  });

  it("above maxClusters only the fleet's status goes out; descriptions are one line within the host's limit", () => {
    const resources = Array.from({ length: 4 }, (_, i) =>
      hubCr(`c${i}`, {
        cluster: `c${i}`,
        conditions: [{ type: "Ready", status: "False", message: `x\n${"y".repeat(300)}` }],
      }),
    );
    const statuses = commitStatuses({ resources, sync: mirrorResult() }, { fleet: "prod", maxClusters: 3 });
    expect(statuses.map((s) => s.context)).toEqual(["knative-fleet/prod"]);
    const all = commitStatuses({ resources, sync: mirrorResult() }, { fleet: "prod", maxClusters: 4 });
    expect(all).toHaveLength(5);
    // Posted in this order: the clusters' by name, the fleet's last, so it never runs ahead of them.
    expect(all.map((s) => s.context)).toEqual([
      ...["c0", "c1", "c2", "c3"].map((c) => `knative-fleet/prod/fleet-system/${c}`),
      "knative-fleet/prod",
    ]);
    for (const s of all) {
      expect(s.description.length).toBeLessThanOrEqual(DESCRIPTION_LIMIT);
      expect(s.description).not.toMatch(/\n/);
    }
    expect(all[0]!.description.endsWith("…")).toBe(true);
  });

  it("the same fleet asks for the same statuses (no time in them): an unchanged fleet sends nothing", () => {
    const resources = [hubCr("c1-serving", { cluster: "c1", conditions: ready })];
    const sync = mirrorResult({ rollout: rollout({}) });
    expect(commitStatuses({ resources, sync }, OPTIONS)).toEqual(
      commitStatuses({ resources, sync }, OPTIONS),
    );
  });
});

describe("a Git host's rate limit", () => {
  const now = 1_000_000;
  it("429 and GitHub's 403 with no requests left wait until Retry-After or the reset time", () => {
    expect(rateLimitedUntil(429, { "retry-after": "30" }, now)).toBe(now + 30_000);
    expect(rateLimitedUntil(403, { "x-ratelimit-remaining": "0", "x-ratelimit-reset": "1600" }, now)).toBe(
      1_600_000,
    );
    expect(rateLimitedUntil(429, {}, now)).toBe(now + 60_000);
    // A reset far off is capped at an hour: a wrong clock on the host does not silence the statuses for days.
    expect(rateLimitedUntil(429, { "x-ratelimit-reset": String(now + 10 ** 9) }, now)).toBe(now + 3_600_000);
  });
  it("a plain 403 (a token without the scope) or a 500 is no rate limit", () => {
    expect(rateLimitedUntil(403, { "x-ratelimit-remaining": "4999" }, now)).toBeUndefined();
    expect(rateLimitedUntil(500, { "retry-after": "5" }, now)).toBeUndefined();
    expect(rateLimitedUntil(201, {}, now)).toBeUndefined();
  });
});
