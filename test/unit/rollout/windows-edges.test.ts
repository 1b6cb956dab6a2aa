import { describe, expect, it } from "vitest";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { clusterWindowClosed, inWindow } from "../../../src/rollout/windows.ts";
import { cluster, rolloutText } from "../../support/fleet-files.ts";

// The edges of maintenance windows: the reason a cluster waits as people read it (days, windows), a window
// that starts when it ends, and what a cluster's time zone property costs: a zone is made into a formatter
// once, not at every sync, and a hostile property (a ClusterProfile's status is written by whoever runs the
// cluster manager) is refused on its length before Intl parses it.

const PROPERTY = "example.com/time-zone";
const specOf = (clusterWindows: unknown[]) =>
  buildFleetModel(
    [
      {
        path: "rollout.yaml",
        text: rolloutText({
          waves: [{ name: "canary", clusterProfiles: [{ namespace: "fleet-system", name: "c1" }] }],
          clusterWindows,
        }),
      },
    ],
    { defaultNamespace: "knative-fleet" },
  ).rollout.policy!.rollout.spec;

/** Monday 2026-03-02, 10:00 UTC. */
const MONDAY_10 = new Date("2026-03-02T10:00:00Z");

/** The time zones Intl is asked to format in (or to validate) while `run` runs. */
function intlZones<T>(run: () => T): { result: T; zones: (string | undefined)[] } {
  const Real = Intl.DateTimeFormat;
  const zones: (string | undefined)[] = [];
  function Counting(locales?: Intl.LocalesArgument, options?: Intl.DateTimeFormatOptions) {
    zones.push(options?.timeZone);
    return new Real(locales, options);
  }
  Object.defineProperty(Intl, "DateTimeFormat", { value: Counting, configurable: true, writable: true });
  try {
    return { result: run(), zones };
  } finally {
    Object.defineProperty(Intl, "DateTimeFormat", { value: Real, configurable: true, writable: true });
  }
}

describe("why a cluster waits, as people read it", () => {
  it("lists the days of a window with commas and the windows of an entry with semicolons", () => {
    const spec = specOf([
      {
        name: "weekends",
        clusterProfiles: [{ namespace: "fleet-system", name: "c2" }],
        windows: [
          { days: ["Sat", "Sun"], start: "02:00", end: "06:00", timeZone: "Europe/Berlin" },
          { start: "22:00", end: "23:00" },
        ],
      },
    ]);
    const c2 = cluster("c2");
    expect(clusterWindowClosed(spec, c2, c2, MONDAY_10)).toBe(
      "outside its maintenance windows weekends (Sat,Sun 02:00-06:00 Europe/Berlin; daily 22:00-23:00 UTC)",
    );
    // Either window open is enough: Monday 22:30 UTC is in the second.
    expect(clusterWindowClosed(spec, c2, c2, new Date("2026-03-02T22:30:00Z"))).toBeUndefined();
  });
});

describe("a window that ends when it starts", () => {
  // The schema refuses one ("a window must not end when it starts"); read anyway, it is 24 hours from its
  // start on a start day, the same rule as any window that runs past midnight: never a window that never opens.
  const saturdays = { days: ["Sat" as const], start: "06:00", end: "06:00", timeZone: "UTC" };

  it("is open from its start on a start day to the same time the next day", () => {
    expect(inWindow(saturdays, new Date("2026-03-07T06:00:00Z"))).toBe(true);
    expect(inWindow(saturdays, new Date("2026-03-07T23:59:00Z"))).toBe(true);
    expect(inWindow(saturdays, new Date("2026-03-08T05:59:00Z"))).toBe(true);
    expect(inWindow(saturdays, new Date("2026-03-08T06:00:00Z"))).toBe(false);
    expect(inWindow(saturdays, new Date("2026-03-07T05:59:00Z"))).toBe(false);
  });
});

describe("a cluster's time zone property", () => {
  const spec = specOf([
    {
      name: "local-nights",
      clusterProfiles: [{ namespace: "fleet-system", name: "c2" }],
      timeZoneProperty: PROPERTY,
      windows: [{ start: "01:00", end: "05:00" }],
    },
  ]);
  const withZone = (zone: string) => cluster("c2", {}, { [PROPERTY]: zone });

  it("makes one formatter per zone, however many syncs read it", () => {
    const c2 = withZone("Pacific/Chatham");
    const { result, zones } = intlZones(() =>
      Array.from({ length: 24 }, (_, hour) =>
        clusterWindowClosed(spec, c2, c2, new Date(Date.UTC(2026, 2, 2, hour, 30))),
      ),
    );
    // Chatham is UTC+13:45 in March: 01:00-05:00 there is 11:15-15:15 UTC.
    expect(result.map((why) => why === undefined)).toEqual(
      Array.from({ length: 24 }, (_, hour) => hour >= 11 && hour < 15),
    );
    expect(zones.filter((zone) => zone === "Pacific/Chatham").length).toBeLessThanOrEqual(2);
    // Every later read of the zone uses the formatter already made: Intl is not asked again.
    const again = intlZones(() => {
      for (let day = 2; day < 9; day++)
        clusterWindowClosed(spec, c2, c2, new Date(Date.UTC(2026, 2, day, 3)));
      return inWindow({ start: "01:00", end: "05:00", timeZone: "Pacific/Chatham" }, MONDAY_10);
    });
    expect(again.zones).toEqual([]);
  });

  it("takes the longest IANA names", () => {
    const c2 = withZone("America/Argentina/Rio_Gallegos");
    // 07:00 UTC is 04:00 in Río Gallegos (UTC-3).
    expect(clusterWindowClosed(spec, c2, c2, new Date("2026-03-02T07:00:00Z"))).toBeUndefined();
    expect(clusterWindowClosed(spec, c2, c2, MONDAY_10)).toBe(
      "outside its maintenance windows local-nights (daily 01:00-05:00 America/Argentina/Rio_Gallegos)",
    );
  });

  it("refuses one longer than 64 characters without handing it to Intl, quoting only 64 of it", () => {
    const hostile = `Europe/${"Berlin".repeat(10)}`;
    expect(hostile.length).toBe(67);
    const c2 = withZone(hostile);
    const { result, zones } = intlZones(() => clusterWindowClosed(spec, c2, c2, MONDAY_10));
    expect(result).toBe(
      `its time zone property ${PROPERTY} is "${hostile.slice(0, 64)}", no IANA time zone, so its maintenance windows local-nights cannot be read`,
    );
    expect(zones).toEqual([]);
    // As huge as a ClusterProfile can hold: refused just the same, and just as cheaply.
    const huge = withZone("x".repeat(1_000_000));
    const refused = intlZones(() => clusterWindowClosed(spec, huge, huge, MONDAY_10));
    expect(refused.result).toMatch(/^its time zone property example\.com\/time-zone is "x{64}", no IANA/);
    expect(refused.zones).toEqual([]);
  });

  it("a short one that names no zone is asked of Intl and refused, closed at every hour", () => {
    const c2 = withZone("Mars/Olympus");
    for (const hour of [0, 3, 12]) {
      expect(clusterWindowClosed(spec, c2, c2, new Date(Date.UTC(2026, 2, 2, hour)))).toBe(
        `its time zone property ${PROPERTY} is "Mars/Olympus", no IANA time zone, so its maintenance windows local-nights cannot be read`,
      );
    }
  });
});
