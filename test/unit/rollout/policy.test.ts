import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { maxUnavailableCount, plannedWaves } from "../../../src/rollout/waves.ts";
import { inWindow } from "../../../src/rollout/windows.ts";
import { crFile } from "../../support/fleet-files.ts";
import { repoRoot } from "../../support/shared.ts";

const PATH = "rollout.yaml";
const model = (text: string, more: { path: string; text: string }[] = []) =>
  buildFleetModel([{ path: PATH, text }, crFile({ name: "a", cluster: "c1" }), ...more], {
    defaultNamespace: "knative-fleet",
  });
const errors = (text: string) => model(text).diagnostics.map(formatDiagnostic);

const HEAD =
  "apiVersion: fleet.knative.dev/v1alpha1\nkind: KnativeRollout\nmetadata:\n  name: default\nspec:\n";
const CANARY = "  waves:\n  - name: canary\n    clusterProfiles: [{ namespace: fleet-system, name: c1 }]\n";

describe("the KnativeRollout file", () => {
  it("is read beside the CR files, with the defaults filled in", () => {
    const parsed = model(HEAD + CANARY);
    expect(parsed.diagnostics).toEqual([]);
    expect(parsed.resources.map((r) => r.resource.metadata.name)).toEqual(["a"]);
    const spec = parsed.rollout.policy!.rollout.spec;
    expect(spec).toMatchObject({
      maxUnavailable: 1,
      soak: "5m",
      timeLimit: "30m",
      onFailure: "Halt",
      paused: false,
    });
    expect(plannedWaves(spec).map((w) => [w.name, w.soakMs, w.timeLimitMs])).toEqual([
      ["canary", 300_000, 1_800_000],
      ["remaining", 300_000, 1_800_000],
    ]);
  });

  it("the fleet-example's policy is valid", () => {
    const text = readFileSync(join(repoRoot, "fleet-example", "rollout", "knative-rollout.yaml"), "utf8");
    const parsed = model(text);
    expect(parsed.diagnostics).toEqual([]);
    expect(plannedWaves(parsed.rollout.policy!.rollout.spec).map((w) => w.name)).toEqual([
      "canary",
      "staging",
      "production",
      "remaining",
    ]);
    expect(plannedWaves(parsed.rollout.policy!.rollout.spec).map((w) => w.approval)).toEqual([
      false,
      false,
      true,
      false,
    ]);
  });

  it("reports a bad approval and bad cluster windows at their file, line and column", () => {
    expect(
      errors(
        `${HEAD}${CANARY}    approval: Yes please\n  clusterWindows:\n  - name: apac\n    windows: [{ start: "01:00", end: "01:00" }]\n    timeZoneProperty: "bad name!"\n  - name: eu\n    clusterProfiles: [{ namespace: fleet-system, name: c1 }]\n    windows: [{ start: "01:00", end: "02:00", timeZone: Mars/Olympus }]\n`,
      ),
    ).toEqual([
      `${PATH}:9:15 spec.waves[0].approval: must be None or Required`,
      `${PATH}:11:5 spec.clusterWindows[0]: clusterWindows need clusterProfiles or clusterSelectorTerms (a cluster either matches)`,
      `${PATH}:12:38 spec.clusterWindows[0].windows[0].end: a window must not end when it starts; 00:00 to 23:59 is almost the whole day`,
      `${PATH}:13:23 spec.clusterWindows[0].timeZoneProperty: must be a ClusterProfile property name such as example.com/time-zone`,
      `${PATH}:16:57 spec.clusterWindows[1].windows[0].timeZone: must be UTC or an IANA time zone such as Europe/Berlin`,
    ]);
  });

  it("reports each bad field at its file, line and column", () => {
    expect(
      errors(
        `${HEAD}${CANARY}    soak: 10 minutes\n  - name: canary\n    clusterSelectorTerms: [{ labelSelector: {} }]\n    maxUnavailable: 0%\n  onFailure: Rollback\n  windows:\n  - { start: "25:00", end: "06:00", timeZone: Mars/Olympus }\n  wavez: []\n`,
      ),
    ).toEqual([
      `${PATH}:9:11 spec.waves[0].soak: must be a duration such as 30s, 10m or 1h30m`,
      `${PATH}:12:21 spec.waves[1].maxUnavailable: must be a count of clusters (1 or more) or a percentage from 1% to 100%`,
      `${PATH}:13:14 spec.onFailure: must be Halt or HaltAndRevert`,
      `${PATH}:15:14 spec.windows[0].start: must be a time of day "HH:MM" (00:00 to 23:59)`,
      `${PATH}:15:47 spec.windows[0].timeZone: must be UTC or an IANA time zone such as Europe/Berlin`,
      `${PATH}:16:3 spec.wavez: unrecognized key; did you mean waves?`,
    ]);
  });

  it("refuses a wave name given twice", () => {
    expect(errors(`${HEAD}${CANARY}${CANARY.replace("  waves:\n", "")}`)).toEqual([
      `${PATH}:9:11 spec.waves[1].name: wave "canary" is named twice`,
    ]);
  });

  it("needs a way to choose each wave's clusters and keeps the name of the implicit wave", () => {
    expect(errors(`${HEAD}  waves:\n  - name: remaining\n`)).toEqual([
      `${PATH}:7:5 spec.waves[0]: a wave needs clusterProfiles or clusterSelectorTerms (a cluster either matches)`,
      `${PATH}:7:11 spec.waves[0].name: "remaining" names the wave of clusters no wave selects; choose another name`,
    ]);
  });

  it("a broken policy fails its file in the fleet model (no policy, its path failed); the CR files stay valid", () => {
    const parsed = model(`${HEAD}  waves: []\n`);
    expect(parsed.rollout).toEqual({ failedPaths: [PATH] });
    expect(parsed.resources.map((r) => r.resource.metadata.name)).toEqual(["a"]);
  });

  it("a repository holds one policy: two fail both files", () => {
    const parsed = model(HEAD + CANARY, [{ path: "second.yaml", text: HEAD + CANARY }]);
    expect(parsed.rollout.failedPaths).toEqual([PATH, "second.yaml"]);
    expect(parsed.diagnostics.map(formatDiagnostic)[0]).toBe(
      `${PATH}:1:1 kind: a fleet repository holds one KnativeRollout; 2 are declared (rollout.yaml:1, second.yaml:1), so changes wait until one is left`,
    );
  });
});

describe("waves and windows", () => {
  it("counts maxUnavailable as a count, or a percentage rounded down but at least one", () => {
    expect(maxUnavailableCount(2, 10)).toBe(2);
    expect(maxUnavailableCount("25%", 10)).toBe(2);
    expect(maxUnavailableCount("10%", 3)).toBe(1);
    expect(maxUnavailableCount("100%", 7)).toBe(7);
  });

  it("reads a window in its zone, across daylight saving and midnight", () => {
    const berlin = { days: ["Sat" as const], start: "22:00", end: "02:00", timeZone: "Europe/Berlin" };
    // Saturday 22:30 in Berlin: 21:30 UTC in winter, 20:30 UTC in summer.
    expect(inWindow(berlin, new Date("2026-01-10T21:30:00Z"))).toBe(true);
    expect(inWindow(berlin, new Date("2026-07-11T20:30:00Z"))).toBe(true);
    expect(inWindow(berlin, new Date("2026-07-11T19:30:00Z"))).toBe(false);
    // Sunday 01:30 belongs to Saturday's window; Sunday 22:30 starts none.
    expect(inWindow(berlin, new Date("2026-01-11T00:30:00Z"))).toBe(true);
    expect(inWindow(berlin, new Date("2026-01-11T21:30:00Z"))).toBe(false);
    const utcMornings = { start: "06:00", end: "08:00", timeZone: "UTC" };
    expect(inWindow(utcMornings, new Date("2026-01-13T07:59:00Z"))).toBe(true);
    expect(inWindow(utcMornings, new Date("2026-01-13T08:00:00Z"))).toBe(false);
  });
});
