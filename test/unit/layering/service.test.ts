import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { matchesOutside, SRC, textOf, withoutComments } from "./support.ts";

// The service reads its settings once: one fleetSettings(config), held in a field and handed on in slices,
// so run, plan and validate cannot drift apart on a fact the service reads raw. The Lease it elects a leader
// and shards by is written in one module, src/service/lease.ts: its API version and its time format. The
// service only composes: under 400 lines, its loops (the sync loop, the reports, the Lease) in modules of
// their own.

const SERVICE = join(SRC, "service/service.ts");
const LEASE = "service/lease.ts";

const serviceCode = (): string => withoutComments(textOf(SERVICE));
const MAX_SERVICE_LINES = 400;

describe("the service reads its settings once", () => {
  it("calls fleetSettings( once in service.ts", () => {
    expect(serviceCode().match(/\bfleetSettings\(/g) ?? []).toHaveLength(1);
  });

  it("reads none of the settings raw from the config", () => {
    const raw = serviceCode().match(
      /\bconfig\.(?:defaultNamespace|allowedClusterProfileNamespaces|hubInstall|placements)\b/g,
    );
    expect(raw ?? []).toEqual([]);
  });
});

describe("the service only composes", () => {
  it(`service.ts is under ${MAX_SERVICE_LINES} lines`, () => {
    const lines = textOf(SERVICE).split("\n").length - (textOf(SERVICE).endsWith("\n") ? 1 : 0);
    expect(lines).toBeLessThan(MAX_SERVICE_LINES);
  });

  it("leaves the one-at-a-time sync loop to sync-loop.ts", () => {
    expect(serviceCode()).not.toMatch(/\bsync\(|\.then\(/);
    expect(serviceCode()).toMatch(/new SyncLoop\(/);
  });
});

describe("one Lease module", () => {
  it("spells the Lease API version in lease.ts alone", () => {
    expect(matchesOutside(/["'`]coordination\.k8s\.io\/v1["'`]/g, [LEASE])).toEqual([]);
  });

  it("formats a MicroTime in lease.ts alone", () => {
    // An ISO time with its milliseconds padded to microseconds: `….123Z` → `….123000Z`.
    expect(matchesOutside(/["'`]0{3}Z["'`]/g, [LEASE])).toEqual([]);
  });

  it("lease.ts has both", () => {
    const lease = withoutComments(textOf(join(SRC, LEASE)));
    expect(lease).toMatch(/"coordination\.k8s\.io\/v1"/);
    expect(lease).toMatch(/"000Z"/);
  });
});
