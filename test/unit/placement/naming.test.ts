import { describe, expect, it } from "vitest";
import { placementCrName } from "../../../src/placement/naming.ts";
import { PROFILES } from "./support.ts";

// A placement's CR for a cluster is `<placement>-<cluster>` when that is a DNS-1123 label of at most 63
// characters; otherwise a cleaned, cut stem and a hash of the exact (placement, namespace, name).

const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const HASHED = /-[0-9a-f]{8}$/;
const name = (placement: string, cluster: string, namespace = PROFILES) =>
  placementCrName(placement, { namespace, name: cluster });

describe("placementCrName", () => {
  it("keeps `<placement>-<cluster>` as it stands up to exactly 63 characters", () => {
    const placement = "p".repeat(30);
    const cluster = "c".repeat(63 - placement.length - 1);
    expect(name(placement, cluster)).toBe(`${placement}-${cluster}`);
    expect(name(placement, "eu-1")).toBe(`${placement}-eu-1`);
  });

  it("hashes a name one character too long, cut to at most 63 characters", () => {
    const placement = "p".repeat(30);
    const crName = name(placement, "c".repeat(63 - placement.length));
    expect(crName).toMatch(HASHED);
    expect(crName.length).toBeLessThanOrEqual(63);
    expect(crName).toMatch(DNS_1123_LABEL);
    expect(crName.startsWith(placement)).toBe(true);
  });

  it("lowercases and turns each run of characters a label may not hold into one dash", () => {
    expect(name("serving", "EU-.west..1")).toMatch(/^serving-eu-west-1-[0-9a-f]{8}$/);
    expect(name("serving", "eu_-_west")).toMatch(/^serving-eu-west-[0-9a-f]{8}$/);
  });

  it("never leaves a dash before the hash where the stem was cut", () => {
    // The cut keeps 54 characters; here the 54th is a dash.
    const crName = name("p", `${"a".repeat(51)}-${"b".repeat(40)}`);
    expect(crName).toMatch(new RegExp(`^p-a{51}${HASHED.source}`));
  });

  it("gives a valid label for any input, `c-<hash>` when nothing readable is left", () => {
    const placements = ["", "-", "Ä", "serving"];
    const clusters = ["", ".", "..x", "-x-", "ÄÖÜ", "x".repeat(300), "a.b.example.com"];
    const names = new Set<string>();
    for (const placement of placements) {
      for (const cluster of clusters) {
        const crName = name(placement, cluster);
        expect(crName, `${placement}/${cluster}`).toMatch(DNS_1123_LABEL);
        expect(crName.length, `${placement}/${cluster}`).toBeLessThanOrEqual(63);
        names.add(crName);
      }
    }
    // Every pair gets its own name.
    expect(names.size).toBe(placements.length * clusters.length);
    expect(name("", "")).toMatch(/^c-[0-9a-f]{8}$/);
    expect(name("Ä", "ÖÜ")).toMatch(/^c-[0-9a-f]{8}$/);
    expect(name("", "x.y")).toMatch(/^x-y-[0-9a-f]{8}$/);
  });

  it("hashes the exact pair: names that clean alike, or one name in two namespaces, stay apart", () => {
    expect(name("p", "a.b")).not.toBe(name("p", "a_b"));
    expect(name("p", "A.b", "one")).not.toBe(name("p", "A.b", "two"));
    // And the same pair always gets the same name, so nothing is renamed.
    expect(name("p", "A.b", "one")).toBe(name("p", "A.b", "one"));
  });
});
