import { describe, expect, it } from "vitest";
import {
  PLACEMENT_KIND_LABEL,
  PLACEMENT_LABEL,
  SOURCE_CLUSTER_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../../src/api/labels.ts";
import { formatIdentity } from "../../../src/fleet/identity.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { type DepartureInput, decideDepartures, placementOf } from "../../../src/placement/departures.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";

const PLACEMENT = formatIdentity({
  kind: "KnativeServingPlacement",
  namespace: "knative-fleet",
  name: "serving",
});
const GRACE = 60_000;

const cr = (
  name: string,
  extra: { placement?: string; repo?: string; deleting?: boolean } = {},
): KubeObject => ({
  apiVersion: "operator.knative.dev/v1beta1",
  kind: "KnativeServing",
  metadata: {
    name,
    namespace: "knative-fleet",
    labels:
      extra.placement === undefined
        ? {
            "fleet.knative.dev/placement": "serving",
            "fleet.knative.dev/placement-kind": "knativeservingplacement",
          }
        : {},
    annotations: {
      [SOURCE_REPOSITORY_ANNOTATION]: extra.repo ?? TEST_REPOSITORY,
      [SOURCE_PATH_ANNOTATION]: "clusters/serving.yaml",
      "fleet.knative.dev/source-cluster": `fleet-system/${name}`,
    },
    ...(extra.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
  },
});

const input = (overrides: Partial<DepartureInput>): DepartureInput => ({
  live: [cr("serving-a"), cr("serving-b")],
  repository: TEST_REPOSITORY,
  desired: new Set(["KnativeServing knative-fleet/serving-a"]),
  placements: new Set([PLACEMENT]),
  pendingPlacements: new Set(),
  failedPaths: new Set(),
  now: 1_000_000,
  gracePeriodMs: GRACE,
  previous: new Map(),
  ...overrides,
});

describe("a cluster that leaves a placement keeps its CR for the grace period", () => {
  it("holds a departed CR from the moment it is first seen out, and reports when it is due", () => {
    const first = decideDepartures(input({}));
    expect(first.held).toEqual([{ kind: "KnativeServing", namespace: "knative-fleet", name: "serving-b" }]);
    expect(first.departures[0]).toMatchObject({ cluster: "fleet-system/serving-b", since: 1_000_000 });
    expect(first.nextDue).toBe(1_000_000 + GRACE);
    // Still out just before the grace period ends: still held, the clock is not restarted.
    const later = decideDepartures(input({ now: 1_000_000 + GRACE - 1, previous: first.since }));
    expect(later.held).toHaveLength(1);
    expect(later.departures[0]!.since).toBe(1_000_000);
    // Out for the whole grace period: no longer held, so the mirror prunes it behind its safeguards.
    const due = decideDepartures(input({ now: 1_000_000 + GRACE, previous: later.since }));
    expect(due.held).toEqual([]);
    expect(due.nextDue).toBeUndefined();
  });

  it("a due departure whose prune a safeguard held stays due on the next syncs: no new grace period", () => {
    // The soak's case: the prune of two due departures exceeded maxPruneFraction and waited for a person;
    // the next sync started their clocks again, so the held record came and went every grace period.
    let since = decideDepartures(input({})).since;
    for (const now of [1_000_000 + GRACE, 1_000_000 + GRACE + 1, 1_000_000 + 5 * GRACE]) {
      const result = decideDepartures(input({ now, previous: since }));
      expect(result.held).toEqual([]);
      expect(result.since.get("KnativeServing knative-fleet/serving-b")).toBe(1_000_000);
      since = result.since;
    }
    // Pruned at last (gone from the hub): its clock goes with it.
    expect(decideDepartures(input({ live: [cr("serving-a")], previous: since })).since.size).toBe(0);
  });

  it("a cluster that comes back forgets its departure; flapping faster than the grace never prunes", () => {
    let since = new Map<string, number>();
    for (let step = 0; step < 10; step++) {
      const now = 1_000_000 + step * (GRACE / 3);
      const out = step % 2 === 0;
      const desired = new Set([
        "KnativeServing knative-fleet/serving-a",
        ...(out ? [] : ["KnativeServing knative-fleet/serving-b"]),
      ]);
      const result = decideDepartures(input({ now, desired, previous: since }));
      if (out) expect(result.held.map((h) => h.name)).toEqual(["serving-b"]);
      else expect(result.since.size).toBe(0);
      since = result.since;
    }
  });

  it("holds every CR of a placement the hub could not expand, with no clock running", () => {
    const result = decideDepartures(input({ desired: new Set(), pendingPlacements: new Set([PLACEMENT]) }));
    expect(result.held.map((h) => h.name)).toEqual(["serving-a", "serving-b"]);
    expect(result.since.size).toBe(0);
  });

  it("holds every CR of a placement file that cannot be read, even when no placement of that name is declared", () => {
    const result = decideDepartures(
      input({ desired: new Set(), placements: new Set(), failedPaths: new Set(["clusters/serving.yaml"]) }),
    );
    expect(result.held.map((h) => h.name)).toEqual(["serving-a", "serving-b"]);
    expect(result.departures).toEqual([]);
  });

  it("leaves alone what is not a departure: a deleted placement, another repository, per-cluster CRs, CRs being deleted", () => {
    expect(decideDepartures(input({ placements: new Set() })).held).toEqual([]);
    const others = [
      cr("x", { repo: "https://other" }),
      cr("y", { placement: "" }),
      cr("z", { deleting: true }),
    ];
    expect(decideDepartures(input({ live: others })).held).toEqual([]);
  });

  it("is due at the earliest of its departures' ends, whatever order the hub lists them in", () => {
    const previous = new Map([["KnativeServing knative-fleet/serving-a", 1_000_000 - 5_000]]);
    for (const live of [
      [cr("serving-a"), cr("serving-b")],
      [cr("serving-b"), cr("serving-a")],
    ]) {
      const result = decideDepartures(input({ live, desired: new Set(), previous }));
      expect(result.departures.map((d) => [d.name, d.pruneAt])).toEqual(
        live.map((o) => [o.metadata.name, o.metadata.name === "serving-a" ? 1_055_000 : 1_060_000]),
      );
      expect(result.nextDue).toBe(1_055_000);
    }
  });

  it("reports a departure without a recorded cluster with an empty one, not a crash", () => {
    const bare = cr("serving-b");
    delete bare.metadata.annotations![SOURCE_CLUSTER_ANNOTATION];
    expect(decideDepartures(input({ live: [bare] })).departures[0]).toMatchObject({ cluster: "" });
  });
});

describe("the placement a hub CR came from", () => {
  const labelled = (labels: Record<string, string>, namespace?: string): KubeObject => ({
    apiVersion: "operator.knative.dev/v1beta1",
    kind: "KnativeEventing",
    metadata: { name: "x", ...(namespace === undefined ? {} : { namespace }), labels },
  });

  it("is read from both labels, the kind's in lower case as a label value must be", () => {
    expect(
      placementOf(
        labelled({ [PLACEMENT_LABEL]: "e", [PLACEMENT_KIND_LABEL]: "knativeeventingplacement" }, "fleet"),
      ),
    ).toEqual({ kind: "KnativeEventingPlacement", namespace: "fleet", name: "e" });
    // A cluster-scoped reading of it (no namespace) still names the placement.
    expect(
      placementOf(labelled({ [PLACEMENT_LABEL]: "e", [PLACEMENT_KIND_LABEL]: "knativeservingplacement" })),
    ).toEqual({ kind: "KnativeServingPlacement", namespace: "", name: "e" });
  });

  it("is none for a CR missing either label or naming a kind that is not a placement's", () => {
    expect(placementOf(labelled({ [PLACEMENT_KIND_LABEL]: "knativeservingplacement" }))).toBeUndefined();
    expect(placementOf(labelled({ [PLACEMENT_LABEL]: "e" }))).toBeUndefined();
    expect(
      placementOf(labelled({ [PLACEMENT_LABEL]: "e", [PLACEMENT_KIND_LABEL]: "knativeserving" })),
    ).toBeUndefined();
  });

  it("of an Eventing placement is that placement: its departed CR is held and reported under it", () => {
    const eventing: KubeObject = {
      ...cr("eventing-b"),
      kind: "KnativeEventing",
      metadata: {
        ...cr("eventing-b").metadata,
        labels: { [PLACEMENT_LABEL]: "serving", [PLACEMENT_KIND_LABEL]: "knativeeventingplacement" },
      },
    };
    const placement = "KnativeEventingPlacement knative-fleet/serving";
    const result = decideDepartures(input({ live: [eventing], placements: new Set([placement]) }));
    expect(result.departures.map((d) => [d.kind, d.name, d.placement])).toEqual([
      ["KnativeEventing", "eventing-b", placement],
    ]);
  });
});
