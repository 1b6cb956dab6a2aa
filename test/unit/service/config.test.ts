import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import {
  ConfigError,
  commitStatusSettings,
  loadFleetSettings,
  loadServiceConfig,
  notifierSettings,
  rolloutSettings,
  shardTimings,
  statusWriteBack,
} from "../../../src/service/config.ts";

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
  it("gives the settings plan and validate use without --config when it names only the repository", () => {
    const defaults = loadFleetSettings(undefined).settings;
    expect(loadFleetSettings(configFile({ repository })).settings).toEqual(defaults);
    // Safe by default: no CR on the hub cluster itself, ClusterProfiles of one namespace.
    expect(defaults).toMatchObject({ hubInstall: false, access: { namespaces: ["fleet-system"] } });
  });

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

describe("the config's status write-back and timings", () => {
  it("has no status write-back without a status section", () => {
    expect(statusWriteBack(loadServiceConfig(configFile({ repository })))).toBeUndefined();
  });

  it("writes the status to the fleet branch by default, at most once per interval", () => {
    const config = loadServiceConfig(
      configFile({ repository: { ...repository, branch: "fleet" }, status: {} }),
    );
    expect(statusWriteBack(config)).toEqual({
      path: "status/",
      branch: "fleet",
      author: { name: "knative-fleet", email: "knative-fleet@noreply.invalid" },
      intervalMs: 30_000,
    });
  });

  it("writes the status to its own branch, by its own author, when told to", () => {
    const status = {
      path: "state/",
      branch: "status",
      authorName: "bot",
      authorEmail: "bot@x",
      interval: "1m",
    };
    expect(statusWriteBack(loadServiceConfig(configFile({ repository, status })))).toEqual({
      path: "state/",
      branch: "status",
      author: { name: "bot", email: "bot@x" },
      intervalMs: 60_000,
    });
  });

  it("refuses a status interval that is no duration", () => {
    const config = loadServiceConfig(configFile({ repository, status: { interval: "soon" } }));
    expect(() => statusWriteBack(config)).toThrow(ConfigError);
  });

  it("commit statuses: the repository from the URL's path, the token read on every request", () => {
    const dir = mkdtempSync(join(tmpdir(), "knative-fleet-token-"));
    writeFileSync(join(dir, "token"), "first\n");
    const commitStatus = {
      provider: "gitea",
      apiUrl: "https://gitea.example/api/v1",
      tokenFile: join(dir, "token"),
    };
    const settings = commitStatusSettings(loadServiceConfig(configFile({ repository, commitStatus })))!;
    expect(settings.forge).toMatchObject({
      provider: "gitea",
      repository: "fleet",
      apiUrl: "https://gitea.example/api/v1",
    });
    expect(settings).toMatchObject({ statuses: { fleet: "fleet", maxClusters: 50 }, intervalMs: 10_000 });
    expect(settings.forge.token()).toBe("first");
    writeFileSync(join(dir, "token"), "rotated");
    expect(settings.forge.token()).toBe("rotated");
    const nested = { url: "https://gitlab.example/group/sub/fleet.git" };
    expect(
      commitStatusSettings(loadServiceConfig(configFile({ repository: nested, commitStatus })))?.forge
        .repository,
    ).toBe("group/sub/fleet");
    expect(refusal({ repository, commitStatus: { ...commitStatus, provider: "bitbucket" } })).toMatch(
      /commitStatus\.provider/,
    );
    expect(refusal({ repository, commitStatus: { ...commitStatus, fleet: "a/b" } })).toMatch(
      /commitStatus\.fleet/,
    );
    expect(commitStatusSettings(loadServiceConfig(configFile({ repository })))).toBeUndefined();
  });

  it("notifications: exactly one of url and urlFile per endpoint, known events only", () => {
    const endpoint = { name: "team", url: "https://hooks.example/x" };
    const settings = notifierSettings(
      loadServiceConfig(
        configFile({ repository, notifications: { endpoints: [endpoint], minInterval: "5m" } }),
      ),
    )!;
    expect(settings).toMatchObject({ fleet: "fleet", minIntervalMs: 300_000, unhealthyAfterMs: 600_000 });
    expect(settings.endpoints[0]).toMatchObject({ name: "team", format: "generic" });
    expect(settings.endpoints[0]!.url()).toBe("https://hooks.example/x");
    expect(refusal({ repository, notifications: { endpoints: [{ name: "team" }] } })).toMatch(
      /exactly one of url and urlFile/,
    );
    expect(refusal({ repository, notifications: { endpoints: [{ ...endpoint, urlFile: "/x" }] } })).toMatch(
      /exactly one of url and urlFile/,
    );
    expect(
      refusal({ repository, notifications: { endpoints: [{ ...endpoint, events: ["Deployed"] }] } }),
    ).toMatch(/config\.yaml:\d+:\d+ notifications\.endpoints\[0\]\.events\[0\]: invalid option/);
    expect(refusal({ repository, notifications: { endpoints: [] } })).toMatch(/notifications\.endpoints/);
  });

  it("reads the shard Lease timings in milliseconds", () => {
    expect(shardTimings(loadServiceConfig(configFile({ repository })))).toEqual({
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
    });
    const sharding = { enabled: true, leaseDuration: "30s", renewDeadline: "20s", retryPeriod: "500ms" };
    expect(shardTimings(loadServiceConfig(configFile({ repository, sharding })))).toEqual({
      leaseDurationMs: 30_000,
      renewDeadlineMs: 20_000,
      retryPeriodMs: 500,
    });
    expect(() =>
      shardTimings(loadServiceConfig(configFile({ repository, sharding: { leaseDuration: "long" } }))),
    ).toThrow('"long" is not a duration');
  });
});

describe("the config's rollout settings", () => {
  it("keeps the rollout key beside the state unless rollout.keyNamespace names its own namespace", () => {
    const config = (rollout?: object) =>
      loadServiceConfig(configFile({ repository, defaultNamespace: "fleet", ...(rollout && { rollout }) }));
    expect(rolloutSettings(config())).toEqual({ checkIntervalMs: 5000, keyNamespace: "fleet" });
    expect(
      rolloutSettings(
        config({ checkInterval: "1m", keyNamespace: "fleet-key", prometheusUrl: "http://prometheus:9090" }),
      ),
    ).toEqual({
      checkIntervalMs: 60_000,
      keyNamespace: "fleet-key",
      prometheusUrl: "http://prometheus:9090",
    });
    expect(refusal({ repository, rollout: { keyNamespace: "Not_A_Namespace" } })).toMatch(
      /rollout\.keyNamespace/,
    );
  });
});
