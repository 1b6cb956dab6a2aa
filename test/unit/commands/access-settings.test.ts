import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { accessSettings } from "../../../src/commands/access-settings.ts";
import { UsageError } from "../../../src/commands/command.ts";

const configFile = (extra: object): string => {
  const path = join(mkdtempSync(join(tmpdir(), "knative-fleet-settings-")), "config.yaml");
  writeFileSync(path, stringify({ repository: { url: "https://git.example/fleet.git" }, ...extra }));
  return path;
};

// `plan` and `clusters` take the service's own settings, so they see the spokes the reconcile may reach.
describe("accessSettings", () => {
  it("without a config file: the service's defaults, one ClusterProfile namespace and nothing opened", () => {
    expect(accessSettings(undefined)).toEqual({
      namespaces: ["fleet-system"],
      policy: { allowForeignCredentialNames: false, allowInsecureServers: false, credentialNamespaces: {} },
    });
  });

  it("from the service's config file, with * for every namespace", () => {
    expect(
      accessSettings(
        configFile({ allowedClusterProfileNamespaces: ["*"], access: { allowInsecureServers: true } }),
      ),
    ).toEqual({
      namespaces: undefined,
      policy: { allowForeignCredentialNames: false, allowInsecureServers: true, credentialNamespaces: {} },
    });
    expect(
      accessSettings(configFile({ allowedClusterProfileNamespaces: ["ocm", "gke"] })).namespaces,
    ).toEqual(["ocm", "gke"]);
  });

  it("a bad config file is a usage error naming the field", () => {
    expect(() => accessSettings(configFile({ allowedClusterProfileNamespaces: [] }))).toThrow(UsageError);
    expect(() => accessSettings(configFile({ allowedClusterProfileNamespaces: [] }))).toThrow(
      /allowedClusterProfileNamespaces/,
    );
  });
});
