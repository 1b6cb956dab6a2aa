import { describe, expect, it } from "vitest";
import { checkVersionMigration, resolveVersion, VersionError } from "../../../src/render/index.ts";

const SERVING = ["1.21.3", "1.22.1", "1.21.0", "1.20.2"];

describe("resolveVersion", () => {
  it("takes the newest release when the version is empty or latest", () => {
    expect(resolveVersion(undefined, SERVING, "Knative Serving")).toBe("1.22.1");
    expect(resolveVersion("", SERVING, "Knative Serving")).toBe("1.22.1");
    expect(resolveVersion("latest", SERVING, "Knative Serving")).toBe("1.22.1");
  });

  it("takes the newest patch of a MAJOR.MINOR version", () => {
    expect(resolveVersion("1.21", SERVING, "Knative Serving")).toBe("1.21.3");
    expect(resolveVersion("1.20", SERVING, "Knative Serving")).toBe("1.20.2");
  });

  it("takes an exact release as it is", () => {
    expect(resolveVersion("1.21.0", SERVING, "Knative Serving")).toBe("1.21.0");
  });

  it("orders by number, not by text", () => {
    expect(resolveVersion("", ["1.9.0", "1.10.0", "1.2.11"], "Knative Serving")).toBe("1.10.0");
  });

  it("refuses an unknown version, listing the available ones newest first", () => {
    expect(() => resolveVersion("1.23.0", SERVING, "Knative Serving")).toThrow(
      new VersionError("Knative Serving 1.23.0 is not available (available: 1.22.1, 1.21.3, 1.21.0, 1.20.2)"),
    );
    expect(() => resolveVersion("1.19", SERVING, "Knative Serving")).toThrow(/1\.19 is not available/);
    expect(() => resolveVersion("1.22.0", SERVING, "Knative Serving")).toThrow(/1\.22\.0 is not available/);
  });

  it("refuses what is not a version", () => {
    for (const version of ["v1.22.1", "1", "1.22.1.4", "1.22.x", "01.22"]) {
      expect(() => resolveVersion(version, SERVING, "Knative Serving")).toThrow(
        /is not valid: expected MAJOR/,
      );
    }
  });

  it("says when the source has no release at all", () => {
    expect(() => resolveVersion("", [], "Knative Eventing")).toThrow(
      "no Knative Eventing release is available",
    );
  });
});

describe("checkVersionMigration", () => {
  const eligible = { type: "VersionMigrationEligible", status: "True" };

  it("allows a first install, the same version and one minor up or down", () => {
    expect(checkVersionMigration("KnativeServing", undefined, "1.22.1")).toEqual(eligible);
    expect(checkVersionMigration("KnativeServing", "", "1.22.1")).toEqual(eligible);
    expect(checkVersionMigration("KnativeServing", "1.22.1", "1.22.1")).toEqual(eligible);
    expect(checkVersionMigration("KnativeServing", "1.21.3", "1.22.1")).toEqual(eligible);
    expect(checkVersionMigration("KnativeEventing", "1.22.2", "1.21.4")).toEqual(eligible);
  });

  it("allows anything from the special latest version", () => {
    expect(checkVersionMigration("KnativeServing", "latest", "1.10.0")).toEqual(eligible);
  });

  it("refuses a jump of more than one minor, up or down, with upstream's reason and message", () => {
    expect(checkVersionMigration("KnativeServing", "1.20.2", "1.22.1")).toEqual({
      type: "VersionMigrationEligible",
      status: "False",
      reason: "Error",
      message:
        "Version migration is not eligible with message: not supported to upgrade or downgrade across " +
        "multiple MINOR versions. The installed KnativeServing version is v1.20.2.",
    });
    expect(checkVersionMigration("KnativeEventing", "1.22.2", "1.20.0")).toMatchObject({
      status: "False",
      message: expect.stringContaining(
        "multiple MINOR versions. The installed KnativeEventing version is v1.22.2.",
      ),
    });
  });

  it("refuses a change of major version", () => {
    expect(checkVersionMigration("KnativeServing", "0.26.1", "1.0.0")).toMatchObject({
      status: "False",
      reason: "Error",
      message: expect.stringContaining(
        "across the MAJOR version. The installed KnativeServing version is v0.26.1.",
      ),
    });
  });
});
