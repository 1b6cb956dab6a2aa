import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadProviderConfig, parseProviderConfig } from "../../../src/access/provider-config.ts";
import { scratchDir } from "./support.ts";

const PATH = "/etc/fleet/providers.json";

describe("parseProviderConfig", () => {
  it("reads the upstream file format, in file order, with defaults for what is left out", () => {
    const config = parseProviderConfig(
      JSON.stringify({
        providers: [
          {
            name: "secretreader",
            execConfig: {
              apiVersion: "client.authentication.k8s.io/v1",
              command: "./bin/secretreader-plugin",
              provideClusterInfo: true,
            },
          },
          {
            name: "kubeconfig-secretreader",
            execConfig: {
              apiVersion: "client.authentication.k8s.io/v1beta1",
              command: "/plugins/kubeconfig-secretreader",
              args: null,
              env: [{ name: "KUBECONFIG", value: "/hub/kubeconfig" }],
              interactiveMode: "Never",
              installHint: "apt install kubeconfig-secretreader",
            },
            profileSourcedCLIArgsPolicy: "Append",
            profileSourcedEnvVarsPolicy: "Replace",
          },
        ],
      }),
      PATH,
    );
    expect(config.path).toBe(PATH);
    expect(config.providers.map((p) => p.name)).toEqual(["secretreader", "kubeconfig-secretreader"]);
    expect(config.providers[0]).toEqual({
      name: "secretreader",
      execConfig: {
        apiVersion: "client.authentication.k8s.io/v1",
        command: "./bin/secretreader-plugin",
        args: [],
        env: [],
        provideClusterInfo: true,
      },
      profileSourcedCLIArgsPolicy: "Ignore",
      profileSourcedEnvVarsPolicy: "Ignore",
    });
    expect(config.providers[1]?.execConfig.env).toEqual([{ name: "KUBECONFIG", value: "/hub/kubeconfig" }]);
    expect(config.providers[1]?.profileSourcedCLIArgsPolicy).toBe("Append");
  });

  it.each([
    [
      "a misspelt field, which upstream would silently drop",
      {
        providers: [
          {
            name: "a",
            execConfig: {
              apiVersion: "client.authentication.k8s.io/v1",
              command: "x",
              provideClusterinfo: true,
            },
          },
        ],
      },
      'providers[0].execConfig: unrecognized key: "provideClusterinfo"',
    ],
    [
      "an apiVersion client-go does not speak",
      {
        providers: [
          { name: "a", execConfig: { apiVersion: "client.authentication.k8s.io/v1alpha1", command: "x" } },
        ],
      },
      "providers[0].execConfig.apiVersion: invalid option",
    ],
    [
      "a provider without execConfig",
      { providers: [{ name: "a" }] },
      "providers[0].execConfig: invalid input: expected object, received undefined",
    ],
    [
      "an unknown policy",
      {
        providers: [
          {
            name: "a",
            execConfig: { apiVersion: "client.authentication.k8s.io/v1", command: "x" },
            profileSourcedEnvVarsPolicy: "Merge",
          },
        ],
      },
      "providers[0].profileSourcedEnvVarsPolicy: invalid option",
    ],
    [
      "two providers with one name",
      {
        providers: [
          { name: "a", execConfig: { apiVersion: "client.authentication.k8s.io/v1", command: "x" } },
          { name: "a", execConfig: { apiVersion: "client.authentication.k8s.io/v1", command: "y" } },
        ],
      },
      'providers[1].name: duplicate provider name "a" (first at providers[0])',
    ],
    ["no providers list", { provider: [] }, '(top level): unrecognized key: "provider"'],
  ])("rejects %s, naming the file and field", (_what, file, message) => {
    expect(() => parseProviderConfig(JSON.stringify(file), PATH)).toThrow(`${PATH}: `);
    expect(() => parseProviderConfig(JSON.stringify(file), PATH)).toThrow(message);
  });

  it("rejects text that is not JSON", () => {
    expect(() => parseProviderConfig("providers: []", PATH)).toThrow(`${PATH}: not valid JSON`);
  });
});

describe("loadProviderConfig", () => {
  const dir = scratchDir();

  it("turns multicluster off without a path, saying so", async () => {
    expect(await loadProviderConfig(undefined)).toEqual({
      enabled: false,
      why: "--clusterprofile-provider-file is not set",
    });
  });

  it("turns multicluster off when the file does not exist", async () => {
    const state = await loadProviderConfig(join(dir, "missing.json"));
    expect(state.enabled).toBe(false);
    expect(state.enabled === false && state.why).toContain(
      "missing.json (--clusterprofile-provider-file) does not exist",
    );
  });

  it("loads a file that exists", async () => {
    const path = join(dir, "providers.json");
    writeFileSync(path, JSON.stringify({ providers: [] }));
    expect(await loadProviderConfig(path)).toEqual({ enabled: true, config: { path, providers: [] } });
  });

  it("fails on a file it cannot read, rather than turning multicluster off", async () => {
    await expect(loadProviderConfig(dir)).rejects.toThrow(`${dir}: cannot read the access-provider file`);
  });
});
