import { describe, expect, it } from "vitest";
import { DESIRED_HASH_ANNOTATION } from "../../../src/api/labels.ts";
import { formatIdentity } from "../../../src/fleet/identity.ts";
import { type ApplyStep, decideApplies } from "../../../src/mirror/decide.ts";
import {
  type GateInput,
  isGated,
  isPending,
  isSafe,
  openWaveIndex,
  soaked,
  weigh,
} from "../../../src/rollout/weigh.ts";
import { cluster, FakeHub, fleetModel, REPOSITORY } from "./support.ts";

// The gate's weighing on its own: which CRs are members and in what order, what is known of each, and the
// questions the phases ask of them. The rollout model checks the guarantees; this pins the parts.

const CLUSTERS = ["c1", "c2", "c3"];
const INVENTORY = CLUSTERS.map((name) => cluster(name));
const POLICY = {
  waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
  soak: "1m",
};
const T0 = Date.parse("2026-03-02T10:00:00Z");
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const key = (name: string) => `KnativeServing knative-fleet/${name}-serving`;

/** 1.21 installed everywhere, healthy and soaked: the rollout complete, every CR with its baseline. */
function installed() {
  const hub = new FakeHub();
  const model = fleetModel(CLUSTERS, POLICY, () => "1.21");
  for (let t = 0; t < 600; t += 30) {
    hub.applied = [];
    hub.sync(model, "a", at(t), INVENTORY);
    for (const applied of hub.applied) hub.report(applied.split("/")[1]!, true);
  }
  expect(hub.state?.phase).toBe("Complete");
  return hub;
}

/** What the gate would weigh for `version` at `commit`, the steps in the order given. */
function weighed(
  hub: FakeHub,
  version: (c: string) => string | null,
  commit: string,
  order = (s: ApplyStep[]) => s,
) {
  const model = fleetModel(CLUSTERS, POLICY, version);
  const steps = order(
    decideApplies(model.resources, { repository: REPOSITORY, branch: "main", commit }, hub.live()),
  );
  const input: GateInput = {
    spec: model.rollout.policy!.rollout.spec,
    hubPaused: false,
    commit,
    clusters: INVENTORY,
    state: hub.state,
    frozen: model.files.filter((f) => f.status === "failed").flatMap((f) => f.declares),
    held: [],
    now: at(1000),
  };
  return { input, steps, weighing: weigh(input, steps, hub.live()) };
}

describe("the gate's weighing", () => {
  it("orders members by wave, then by name, whatever order the steps come in; conflicts and terminating CRs are no members", () => {
    const hub = installed();
    const { weighing } = weighed(
      hub,
      () => "1.22",
      "b",
      (steps) =>
        [...steps]
          .reverse()
          .map((step) =>
            step.name === "c3-serving"
              ? { ...step, action: "conflict" as const, reason: "owned elsewhere" }
              : step,
          ),
    );
    expect(weighing.members.map((m) => [m.key, m.wave])).toEqual([
      [key("c1"), 0],
      [key("c2"), 1],
    ]);
    const terminating = weighed(
      hub,
      () => "1.22",
      "b",
      (steps) =>
        steps.map((step) =>
          step.name === "c2-serving" ? { ...step, action: "terminating" as const, reason: "deleting" } : step,
        ),
    ).weighing;
    expect(terminating.members.map((m) => m.key)).toEqual([key("c1"), key("c3")]);
  });

  it("a refused change keeps the content Git last wanted as its target, frozen", () => {
    const hub = installed();
    const before = hub.state!.crs[key("c2")]!.target!.hash;
    const { weighing } = weighed(
      hub,
      () => "1.22",
      "b",
      (steps) =>
        steps.map((step) =>
          step.name === "c2-serving"
            ? { ...step, action: "refused" as const, reason: "no", error: "no" }
            : step,
        ),
    );
    const c2 = weighing.members.find((m) => m.key === key("c2"))!;
    expect(c2.frozen).toBe(true);
    expect(c2.target).toBe(before);
    expect(weighing.crs[key("c2")]!.target!.hash).toBe(before); // not moved to what the refused step wanted
    expect(weighing.members.find((m) => m.key === key("c1"))!.frozen).toBe(false);
  });

  it("weighs a failed file's CR, even one never created, only once a target was known for it", () => {
    const hub = installed();
    // c3's file fails validation: its CR stays a member at its last target.
    const failed = weighed(hub, (c) => (c === "c3" ? null : "1.22"), "b").weighing;
    const c3 = failed.members.find((m) => m.key === key("c3"))!;
    expect(c3).toMatchObject({ frozen: true, path: "", target: hub.state!.crs[key("c3")]!.target!.hash });
    expect(failed.members.filter((m) => m.key === key("c3"))).toHaveLength(1);
    // Not on the hub (never created, or gone) but wanted before: still weighed, and its target kept.
    hub.objects.delete(key("c3"));
    const gone = weighed(hub, (c) => (c === "c3" ? null : "1.22"), "b").weighing;
    expect(gone.members.find((m) => m.key === key("c3"))?.target).toBe(c3.target);
    expect(gone.crs[key("c3")]?.target?.hash).toBe(c3.target);
    // Never created and never wanted before: nothing to hold.
    delete hub.state!.crs[key("c3")];
    expect(weighed(hub, (c) => (c === "c3" ? null : "1.22"), "b").weighing.members.map((m) => m.key)).toEqual(
      [key("c1"), key("c2")],
    );
  });

  it("forgets a CR gone from Git and the hub, and keeps one still on the hub", () => {
    const hub = installed();
    hub.state!.crs["KnativeServing knative-fleet/gone-serving"] = { target: { hash: "abc", commit: "a" } };
    const { weighing } = weighed(
      hub,
      (c) => (c === "c2" ? null : "1.21"),
      "a",
      (steps) => steps.filter((step) => step.name !== "c2-serving"),
    );
    expect(weighing.crs["KnativeServing knative-fleet/gone-serving"]).toBeUndefined();
    expect(weighing.crs[key("c2")]?.baseline).toBeDefined(); // on the hub still: its baseline stays
  });

  it("says a commit changed a target only when one was wanted before at another commit", () => {
    const hub = installed();
    expect(weighed(hub, () => "1.22", "b").weighing.changedByCommit).toBe(true);
    expect(weighed(hub, () => "1.21", "b").weighing.changedByCommit).toBe(false);
    hub.state = undefined;
    expect(weighed(hub, () => "1.22", "b").weighing.changedByCommit).toBe(false);
  });

  it("asks of a member: pending, safe (back to its baseline) or gated, soaked", () => {
    const hub = installed();
    const next = weighed(hub, () => "1.22", "b").weighing;
    const c1 = next.members.find((m) => m.key === key("c1"))!;
    expect([isPending(c1), isSafe(next, c1), isGated(next, c1)]).toEqual([true, false, true]);
    expect(openWaveIndex(next)).toBe(0);
    // c1 on 1.22 now; Git goes back to 1.21, its baseline: safe, not gated.
    const object = weighed(hub, () => "1.22", "b").steps.find(
      (s) => s.name === "c1-serving",
    )! as ApplyStep & { object: never };
    hub.write(object);
    hub.report("c1-serving", true);
    const back = weighed(hub, () => "1.21", "c").weighing;
    const c1back = back.members.find((m) => m.key === key("c1"))!;
    expect([isPending(c1back), isSafe(back, c1back), isGated(back, c1back)]).toEqual([true, true, false]);
    // Unchanged content is neither pending nor gated; a member on its content soaks only with the health of that content.
    const c2 = back.members.find((m) => m.key === key("c2"))!;
    expect([isPending(c2), isGated(back, c2), soaked(back, c2)]).toEqual([false, false, true]);
    back.crs[key("c2")]!.health = { ...back.crs[key("c2")]!.health!, hash: "0" };
    expect(soaked(back, c2)).toBe(false);
    expect(formatIdentity(c2.identity)).toBe(key("c2"));
  });

  it("a member not applied yet is unhealthy, and allAtOnce is one wave without soak or limit", () => {
    const hub = new FakeHub();
    const { weighing } = weighed(hub, () => "1.21", "a");
    expect(weighing.members.map((m) => m.health)).toEqual(
      CLUSTERS.map(() => ({ healthy: false, reason: "not applied yet" })),
    );
    const all = weigh({ ...weighing.input, spec: { ...weighing.input.spec, allAtOnce: true } }, [], []);
    expect(all.waves).toEqual([
      {
        name: "all-at-once",
        maxUnavailable: "100%",
        soakMs: 0,
        timeLimitMs: Number.POSITIVE_INFINITY,
        approval: false,
      },
    ]);
    expect(hub.live().every((o) => o.metadata.annotations?.[DESIRED_HASH_ANNOTATION] !== undefined)).toBe(
      true,
    );
  });
});
