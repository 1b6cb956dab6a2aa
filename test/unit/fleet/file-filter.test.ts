import { describe, expect, it } from "vitest";
import { createFileFilter, DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";

describe("createFileFilter", () => {
  const filter = createFileFilter(DEFAULT_FILE_SELECTION);

  it("takes .yaml and .yml files at any depth under clusters/", () => {
    expect(filter.matches("clusters/prod.yaml")).toBe(true);
    expect(filter.matches("clusters/eu/west/prod.yml")).toBe(true);
  });

  it("leaves out other extensions, other folders and dotfiles", () => {
    expect(filter.matches("clusters/prod.json")).toBe(false);
    expect(filter.matches("README.md")).toBe(false);
    expect(filter.matches("docs/clusters/prod.yaml")).toBe(false);
    expect(filter.matches("clusters/.hidden.yaml")).toBe(false);
  });

  it("never counts the status path, even when a glob would match it", () => {
    const everything = createFileFilter({ pathGlob: "**/*.yaml", statusDir: "status/" });
    expect(everything.matches("clusters/prod.yaml")).toBe(true);
    expect(everything.matches("status/prod.yaml")).toBe(false);
    expect(everything.matches("status/eu/prod.yaml")).toBe(false);
    expect(everything.isStatus("status")).toBe(true);
    expect(everything.isStatus("statuses/prod.yaml")).toBe(false);
  });

  it("accepts the status path with or without slashes", () => {
    for (const statusPath of ["status", "/status/", "status/"]) {
      expect(
        createFileFilter({ pathGlob: "**/*.yaml", statusDir: statusPath }).matches("status/a.yaml"),
      ).toBe(false);
    }
    expect(createFileFilter({ pathGlob: "**/*.yaml", statusDir: "" }).matches("status/a.yaml")).toBe(true);
  });

  it("lets the tree walk skip folders that cannot hold a match", () => {
    expect(filter.mayContain("clusters")).toBe(true);
    expect(filter.mayContain("clusters/eu")).toBe(true);
    expect(filter.mayContain("docs")).toBe(false);
    expect(filter.mayContain("status")).toBe(false);
    expect(filter.mayContain("clustersx")).toBe(false);

    const nested = createFileFilter({ pathGlob: "fleet/clusters/*.yaml", statusDir: "status/" });
    expect(nested.mayContain("fleet")).toBe(true);
    expect(nested.mayContain("fleet/clusters")).toBe(true);
    expect(nested.mayContain("fleet/other")).toBe(false);

    const anywhere = createFileFilter({ pathGlob: "**/*.yaml", statusDir: "status/" });
    expect(anywhere.mayContain("any/folder")).toBe(true);
    expect(anywhere.mayContain("status")).toBe(false);
  });
});
