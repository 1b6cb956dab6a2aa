import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { ConfigError, loadServiceConfig } from "../../../src/service/config.ts";

const configFile = (config: object): string => {
  const path = join(mkdtempSync(join(tmpdir(), "knative-fleet-config-")), "config.yaml");
  writeFileSync(path, stringify(config));
  return path;
};
const repository = { url: "https://git.example/fleet.git" };
const refusal = (config: object): string => {
  try {
    loadServiceConfig(configFile(config));
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("the config was accepted");
};

describe("the service's config file", () => {
  it("refuses credentials in the repository URL, pointing at the credentials folder", () => {
    for (const url of [
      "https://bot:ghp_abc@git.example/fleet.git",
      "https://ghp_abc@git.example/fleet.git",
    ]) {
      const message = refusal({ repository: { url } });
      expect(message).toMatch(/config\.yaml:2:\d+ repository\.url: carries credentials/);
      expect(message).toContain("put them in repository.credentialsDir");
      // The refusal names the field, never the secret.
      expect(message).not.toContain("ghp_abc");
    }
  });

  it("installs on the hub itself only when told to", () => {
    expect(loadServiceConfig(configFile({ repository })).hubInstall).toEqual({ enabled: false });
    expect(loadServiceConfig(configFile({ repository, hubInstall: { enabled: true } })).hubInstall).toEqual({
      enabled: true,
    });
  });

  it("refuses a status path that would overwrite the root's files or hide the fleet files", () => {
    for (const path of ["./", "/", "", "../elsewhere", "/abs/status/"]) {
      expect(refusal({ repository, status: { path } })).toContain("is the repository root or outside it");
    }
    // Unquoted, YAML 1.1 reads a lone dot as a number: refused as such, with the hint to quote it.
    expect(refusal({ repository, status: { path: "." } })).toMatch(
      /status\.path: expected string, got number.*quote it/,
    );
    expect(
      refusal({
        repository: { ...repository, pathGlob: "clusters/**/*.yaml" },
        status: { path: "clusters/" },
      }),
    ).toContain("holds every folder repository.pathGlob (clusters/**/*.yaml) reads fleet files from");
    expect(
      refusal({
        repository: { ...repository, pathGlob: "fleet/clusters/*.yaml" },
        status: { path: "fleet" },
      }),
    ).toContain("holds every folder");
    for (const path of ["status/", "clusters/status/", "docs/fleet-status"]) {
      expect(loadServiceConfig(configFile({ repository, status: { path } })).status?.path).toBe(path);
    }
  });
});
