import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { KnativeResource } from "../../../src/api/knative.ts";
import { ALLOW_UNKNOWN_SETTINGS_ANNOTATION } from "../../../src/api/labels.ts";
import { editDistance } from "../../../src/fleet/document-kind.ts";
import { buildFleetModel } from "../../../src/fleet/model.ts";
import { INGRESSES, type Manifest, type Release } from "../../../src/render/index.ts";
import { podTemplateOf } from "../../../src/render/manifest.ts";
import { exampleKeys } from "../../../src/render/release-settings.ts";
import {
  checkFleetSettings,
  checkPlacementSettings,
  checkSettings,
  type SettingsFinding,
} from "../../../src/render/settings-check.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { knativeEventing, knativeServing, releases } from "./fixtures.ts";

// The release-aware settings check over the real releases of ../shared: every key every release documents
// passes, the Knative docs' settings pass, and a typo of any name the releases have is an error that names it.

const ALL_INGRESSES = Object.fromEntries(INGRESSES.map((name) => [name, { enabled: true }]));
const versions = (component: string) => readdirSync(join(knativeReleasesDir(), component)).sort();
const SERVING_VERSIONS = versions("knative-serving");
const EVENTING_VERSIONS = versions("knative-eventing");

/** Every release of the corpus, Serving with every ingress, and a CR that asks for it. */
async function corpus(): Promise<{ cr: (spec: object) => KnativeResource; release: Release }[]> {
  const servings = SERVING_VERSIONS.map((version) => ({
    cr: (spec: object) => knativeServing({ version, ingress: ALL_INGRESSES, ...spec }),
  }));
  const eventings = EVENTING_VERSIONS.map((version) => ({
    cr: (spec: object) => knativeEventing({ version, ...spec }),
  }));
  return Promise.all(
    [...servings, ...eventings].map(async ({ cr }) => ({ cr, release: await releases.load(cr({})) })),
  );
}

const errors = (findings: readonly SettingsFinding[]) => findings.filter((f) => f.severity === "error");
const named = (manifests: readonly Manifest[], kind: string) =>
  manifests.filter((m) => m.kind === kind && m.metadata.name).map((m) => m.metadata.name!);

/** A typo: the middle character dropped. */
const typo = (name: string) => name.slice(0, name.length >> 1) + name.slice((name.length >> 1) + 1);

/**
 * The typo is an error at `field` whose did-you-mean names the original or a name at least as close.
 * Returns whether it named the original.
 */
function expectTypoCaught(
  findings: readonly SettingsFinding[],
  field: readonly PropertyKey[],
  mutant: string,
  original: string,
): boolean {
  const found = errors(findings).filter((f) => JSON.stringify(f.field) === JSON.stringify(field));
  expect(found, `${mutant} (typo of ${original}) at ${field.join(".")}`).toHaveLength(1);
  const hint = /did you mean (\S+)\?/.exec(found[0]!.message)?.[1];
  if (original.length >= 4) expect(hint, found[0]!.message).toBeDefined();
  if (hint === undefined) return false;
  const distance = (name: string) => editDistance(mutant.toLowerCase(), name.toLowerCase(), 9);
  expect(distance(hint)).toBeLessThanOrEqual(distance(original));
  return hint === original;
}

// Each test reads every release of ../shared (its first one loads them all): slow on a loaded machine.
describe("the settings check over every release of ../shared", { timeout: 60_000 }, () => {
  it("every key of every shipped ConfigMap's data and _example passes, in every release", async () => {
    let configMaps = 0;
    let keys = 0;
    for (const { cr, release } of await corpus()) {
      const config: Record<string, Record<string, string>> = {};
      for (const configMap of release.manifests.filter((m) => m.kind === "ConfigMap")) {
        const data = (configMap.data ?? {}) as Record<string, string>;
        const documented = [
          ...Object.keys(data).filter((key) => key !== "_example"),
          ...(data._example ? exampleKeys(data._example) : []),
        ];
        config[configMap.metadata.name!] = Object.fromEntries(documented.map((key) => [key, "x"]));
        configMaps++;
        keys += documented.length;
      }
      // The ingress-class values are checked as values: give them real ones.
      if (config["config-network"])
        config["config-network"]["ingress-class"] = "kourier.ingress.networking.knative.dev";
      expect(checkSettings(cr({ config }), release)).toEqual([]);
    }
    console.log(`settings corpus: ${configMaps} ConfigMaps, ${keys} documented keys, all accepted`);
    expect(keys).toBeGreaterThan(800);
  });

  it("the Knative docs' settings pass", async () => {
    const docs: KnativeResource[] = [
      knativeServing({
        ingress: { kourier: { enabled: true, "service-type": "LoadBalancer" } },
        config: {
          network: { "ingress-class": "kourier.ingress.networking.knative.dev" },
          autoscaler: { "container-concurrency-target-default": "100", "enable-scale-to-zero": "false" },
          // default-affinity-type is commented out in the _example: shown, off by default.
          deployment: {
            "registries-skipping-tag-resolving": "kind.local,ko.local,dev.local",
            "default-affinity-type": "none",
          },
          domain: { "example.com": "", "example.org": "selector:\n  app: nonprofit\n" },
          logging: { "loglevel.controller": "debug", "loglevel.net-kourier-controller": "debug" },
          observability: {
            "logging.request-log-template": '{"httpRequest": {"requestMethod": "{{.Request.Method}}"}}',
            "metrics-protocol": "prometheus",
          },
          features: { "kubernetes.podspec-affinity": "enabled", "multi-container": "enabled" },
          defaults: { "revision-timeout-seconds": "300" },
          "config-gc": { "max-non-active-revisions": "5" },
        },
        workloads: [
          {
            name: "activator",
            resources: [{ container: "activator", requests: { cpu: "300m", memory: "100Mi" } }],
          },
          { name: "webhook", env: [{ container: "webhook", envVars: [{ name: "A", value: "b" }] }] },
        ],
        services: [{ name: "webhook", labels: { a: "b" } }],
        podDisruptionBudgets: [{ name: "activator-pdb", minAvailable: 1 }],
      }),
      knativeServing({
        ingress: { istio: { enabled: true } },
        config: { istio: { "local-gateway.knative-serving.knative-local-gateway": "x" } },
      }),
      // The legacy spelling Knative networking still reads (security-guard's own install uses it).
      knativeServing({
        security: { securityGuard: { enabled: true } },
        ingress: { kourier: { enabled: true } },
        config: {
          network: { "ingress.class": "kourier.ingress.networking.knative.dev", autoTLS: "Enabled" },
          deployment: { registriesSkippingTagResolving: "ko.local" },
        },
      }),
      knativeEventing({
        config: {
          "br-defaults": { "default-br-config": "clusterDefault:\n  brokerClass: MTChannelBasedBroker\n" },
          "default-ch-webhook": { "default-ch-config": "clusterDefault: {}\n" },
          features: { "new-apiserversource-filters": "enabled" },
          logging: { "loglevel.controller": "debug", "loglevel.mt-broker-ingress": "debug" },
          "ping-defaults": { "data-max-size": "4096" },
        },
        workloads: [{ name: "eventing-controller", replicas: 2 }],
      }),
    ];
    for (const cr of docs) expect(checkSettings(cr, await releases.load(cr))).toEqual([]);
    // The docs' high-availability example: no error; its replicas 3 meet the release's 80% PDBs, which then
    // need all 3 pods, and that is the drain warning (knative/operator#1701), as meant.
    const ha = knativeServing({
      "high-availability": { replicas: 3 },
      workloads: [
        {
          name: "activator",
          resources: [{ container: "activator", limits: { cpu: "1000m", memory: "250Mi" } }],
        },
      ],
    });
    expect(
      checkSettings(ha, await releases.load(ha)).map((f) => [f.severity, f.message.split(" keeps")[0]]),
    ).toEqual([
      ["warning", "PodDisruptionBudget activator-pdb"],
      ["warning", "PodDisruptionBudget webhook-pdb"],
    ]);
  });

  it("a typo of any ConfigMap, key, workload, container, Service or PDB name is an error with did-you-mean", async () => {
    const counts = { configMaps: 0, keys: 0, workloads: 0, containers: 0, services: 0, pdbs: 0, exact: 0 };
    for (const { cr, release } of await corpus()) {
      const check = (spec: object) => checkSettings(cr(spec), release);
      const known = (name: string, names: readonly string[]) => names.includes(name);
      const configMaps = release.manifests.filter((m) => m.kind === "ConfigMap");
      const configMapNames = configMaps.map((m) => m.metadata.name!);
      for (const configMap of configMaps) {
        const name = configMap.metadata.name!;
        const mutant = typo(name);
        if (!known(mutant, configMapNames) && !known(`config-${mutant}`, configMapNames)) {
          counts.configMaps++;
          if (expectTypoCaught(check({ config: { [mutant]: {} } }), ["spec", "config", mutant], mutant, name))
            counts.exact++;
        }
        if (["config-domain", "config-kreference-mapping"].includes(name)) continue;
        const data = (configMap.data ?? {}) as Record<string, string>;
        const keys = new Set([
          ...Object.keys(data).filter((key) => key !== "_example"),
          ...(data._example ? exampleKeys(data._example) : []),
        ]);
        for (const key of keys) {
          const wrong = typo(key);
          if (keys.has(wrong) || /^(loglevel|gateway|local-gateway)\./.test(wrong)) continue;
          counts.keys++;
          const findings = check({ config: { [name]: { [wrong]: "x" } } });
          if (expectTypoCaught(findings, ["spec", "config", name, wrong], wrong, key)) counts.exact++;
        }
      }
      const workloads = release.manifests.filter((m) => ["Deployment", "StatefulSet"].includes(m.kind));
      const workloadNames = workloads.map((m) => m.metadata.name!);
      for (const workload of workloads) {
        const name = workload.metadata.name!;
        const mutant = typo(name);
        if (!known(mutant, workloadNames)) {
          counts.workloads++;
          const findings = check({ workloads: [{ name: mutant, replicas: 1 }] });
          if (expectTypoCaught(findings, ["spec", "workloads", 0, "name"], mutant, name)) counts.exact++;
        }
        const containers = podTemplateOf(workload)!.spec.containers.map((c) => c.name);
        for (const container of containers) {
          const wrong = typo(container);
          if (known(wrong, containers)) continue;
          counts.containers++;
          const findings = check({ workloads: [{ name, resources: [{ container: wrong }] }] });
          const field = ["spec", "workloads", 0, "resources", 0, "container"];
          if (expectTypoCaught(findings, field, wrong, container)) counts.exact++;
        }
      }
      for (const [list, kind] of [
        ["services", "Service"],
        ["podDisruptionBudgets", "PodDisruptionBudget"],
      ] as const) {
        const names = named(release.manifests, kind);
        for (const name of names) {
          const mutant = typo(name);
          if (known(mutant, names)) continue;
          counts[list === "services" ? "services" : "pdbs"]++;
          const findings = check({ [list]: [{ name: mutant }] });
          if (expectTypoCaught(findings, ["spec", list, 0, "name"], mutant, name)) counts.exact++;
        }
      }
    }
    const total =
      counts.configMaps + counts.keys + counts.workloads + counts.containers + counts.services + counts.pdbs;
    console.log(
      `settings typos: ${total} caught (${counts.configMaps} ConfigMaps, ${counts.keys} keys, ${counts.workloads} workloads, ` +
        `${counts.containers} containers, ${counts.services} Services, ${counts.pdbs} PDBs); ${counts.exact} suggest the original, the rest a name as close`,
    );
    expect(counts.exact / total).toBeGreaterThan(0.9);
  });

  it("the cases of issue #36: autoscalr, activatr, ClusterIp, each with its did-you-mean", async () => {
    const serving = knativeServing({
      ingress: { kourier: { enabled: true, "service-type": "ClusterIp" } },
      config: {
        autoscalr: { "enable-scale-to-zero": "false" },
        autoscaler: { "enable-scale-to-zro": "false" },
      },
      workloads: [{ name: "activatr", replicas: 3 }],
      resources: [{ container: "activatr" }],
    });
    const findings = checkSettings(serving, await releases.load(serving));
    expect(
      findings.map((f) => [f.field.join("."), f.severity, /did you mean (\S+)\?/.exec(f.message)?.[1]]),
    ).toEqual([
      ["spec.config.autoscalr", "error", "autoscaler"],
      ["spec.config.autoscaler.enable-scale-to-zro", "error", "enable-scale-to-zero"],
      ["spec.workloads.0.name", "error", "activator"],
      ["spec.resources.0.container", "error", "activator"],
      ["spec.ingress.kourier.service-type", "error", "ClusterIP"],
    ]);
    expect(findings[0]!.message).toContain(ALLOW_UNKNOWN_SETTINGS_ANNOTATION);
  });

  it("an ingress class that is none, or names an ingress the CR does not install", async () => {
    const serving = knativeServing({
      config: { network: { "ingress-class": "kourier.ingres.networking.knative.dev" } },
    });
    const release = await releases.load(serving);
    expect(checkSettings(serving, release)).toMatchObject([
      {
        severity: "error",
        message: expect.stringContaining("did you mean kourier.ingress.networking.knative.dev?"),
      },
    ]);
    const notInstalled = knativeServing({
      config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" } },
    });
    expect(checkSettings(notInstalled, release)).toMatchObject([
      { severity: "warning", message: expect.stringContaining("spec.ingress.kourier.enabled: true") },
    ]);
  });

  it("an ingress's ConfigMap while the CR does not install that ingress says which to enable", async () => {
    const serving = knativeServing({ config: { kourier: { "enable-service-access-logging": "true" } } });
    const [finding, ...rest] = checkSettings(serving, await releases.load(serving));
    expect(rest).toEqual([]);
    expect(finding).toMatchObject({ field: ["spec", "config", "kourier"], severity: "error" });
    expect(finding!.message).toContain(
      "it comes with the kourier ingress, which this KnativeServing does not install (set spec.ingress.kourier.enabled: true)",
    );
  });

  it("a key of a ConfigMap whose _example calls it deprecated and documents nothing is a warning", async () => {
    const serving = knativeServing({ config: { tracing: { backend: "zipkin" } } });
    expect(checkSettings(serving, await releases.load(serving))).toMatchObject([
      {
        field: ["spec", "config", "tracing", "backend"],
        severity: "warning",
        message: expect.stringContaining("config-tracing documents no settings"),
      },
    ]);
  });

  it("the annotation keeps a setting the check does not know, and only that one", async () => {
    const serving = (allowed: string) =>
      ({
        ...knativeServing({
          config: { autoscaler: { "new-key": "1", "other-key": "2" }, "config-new": { a: "b" } },
          workloads: [{ name: "my-extra", replicas: 1 }],
        }),
        metadata: {
          name: "knative-serving",
          namespace: "knative-serving",
          annotations: { [ALLOW_UNKNOWN_SETTINGS_ANNOTATION]: allowed },
        },
      }) as KnativeResource;
    const release = await releases.load(serving(""));
    const fields = (allowed: string) =>
      checkSettings(serving(allowed), release).map((f) => f.field.join("."));
    expect(fields("")).toEqual([
      "spec.config.autoscaler.new-key",
      "spec.config.autoscaler.other-key",
      "spec.config.config-new",
      "spec.workloads.0.name",
    ]);
    expect(fields("spec.config.autoscaler.new-key, spec.config.config-new ,spec.workloads.my-extra")).toEqual(
      ["spec.config.autoscaler.other-key"],
    );
    expect(fields("spec.config.autoscaler.*")).toEqual(["spec.config.config-new", "spec.workloads.0.name"]);
  });

  it("an upgrade warns of a setting the target minor drops; a key the installed minor lacked is still an error", async () => {
    const installed = await releases.load(knativeEventing({ version: "1.20" }));
    const target = await releases.load(knativeEventing({ version: "1.23" }));
    // klog-verbosity is documented in 1.23's config-logging, not 1.20's: a downgrade drops it.
    const cr = knativeEventing({
      version: "1.20",
      config: { logging: { "klog-verbosity": "2", "klog-verbosty": "2" } },
    });
    const downgrade = checkSettings(cr, installed, target);
    expect(downgrade.map((f) => [f.field.join("."), f.severity])).toEqual([
      ["spec.config.logging.klog-verbosity", "warning"],
      ["spec.config.logging.klog-verbosty", "error"],
    ]);
    expect(downgrade[0]!.message).toContain("in the installed 1.23.0 release but not in 1.20.3");
    // Without the installed release, the same key is an error: nothing says it was ever in effect.
    expect(errors(checkSettings(cr, installed))).toHaveLength(2);
  });

  it("an upgrade warns of a workload the target drops (a target without request-reply, as no real minor has yet)", async () => {
    const installed = await releases.load(knativeEventing({ version: "1.22" }));
    const real = await releases.load(knativeEventing({ version: "1.23" }));
    const target: Release = {
      ...real,
      manifests: real.manifests.filter((m) => m.metadata.name !== "request-reply"),
    };
    const cr = knativeEventing({ version: "1.23", workloads: [{ name: "request-reply", replicas: 2 }] });
    expect(checkSettings(cr, target, installed)).toMatchObject([
      {
        field: ["spec", "workloads", 0, "name"],
        severity: "warning",
        message: expect.stringContaining("is in the installed 1.22.2 release but not in 1.23.0"),
      },
    ]);
    expect(errors(checkSettings(cr, target))).toHaveLength(1);
  });

  it("HA replicas with a PDB that needs every replica warn (knative/operator#1701); a lower minAvailable does not", async () => {
    const ha = knativeServing({ "high-availability": { replicas: 2 } });
    const release = await releases.load(ha);
    const findings = checkSettings(ha, release);
    expect(findings.map((f) => [f.field.join("."), f.severity])).toEqual([
      ["spec.high-availability.replicas", "warning"],
      ["spec.high-availability.replicas", "warning"],
    ]);
    expect(findings[0]!.message).toContain("activator-pdb keeps minAvailable 80% of 2 activator replicas");
    const relaxed = knativeServing({
      "high-availability": { replicas: 2 },
      podDisruptionBudgets: [
        { name: "activator-pdb", minAvailable: 1 },
        { name: "webhook-pdb", minAvailable: "50%" },
      ],
    });
    expect(checkSettings(relaxed, release)).toEqual([]);
    const five = knativeServing({ "high-availability": { replicas: 5 } });
    expect(checkSettings(five, release)).toEqual([]);
    // One replica is the release's own default: the CR made nothing worse.
    const one = knativeServing({ "high-availability": { replicas: 1 } });
    expect(checkSettings(one, release)).toEqual([]);
    const pinned = knativeServing({
      workloads: [{ name: "webhook", replicas: 3 }],
      podDisruptionBudgets: [{ name: "webhook-pdb", minAvailable: 3 }],
    });
    expect(checkSettings(pinned, release).map((f) => f.field.join("."))).toEqual(
      ["spec.podDisruptionBudgets.1.minAvailable"].map((f) => f.replace(".1.", ".0.")),
    );
  });
});

describe("exampleKeys", () => {
  it("reads settings, set or commented out, and not prose, indented values or URLs", () => {
    const example = [
      "# This block is not actually functional configuration,",
      "# See: https://knative.dev/docs",
      "# https://knative.dev/docs/serving",
      "# For example, to add the `service-x` audience:",
      "# Example:",
      "svc.cluster.local: |",
      "  selector:",
      "    app: secret",
      "#   app: secret",
      '# default-affinity-type: "prefer-spread-revision-over-nodes"',
      "runtime-class-name: |",
      'loglevel.controller: "info"',
    ].join("\n");
    expect(exampleKeys(example)).toEqual([
      "svc.cluster.local",
      "default-affinity-type",
      "runtime-class-name",
      "loglevel.controller",
    ]);
  });
});

describe("findings at the fleet file's line and column", () => {
  it("a CR file's field; a placement's template field, or the override patch that writes it", async () => {
    const files = [
      {
        path: "clusters/a.yaml",
        text: `apiVersion: operator.knative.dev/v1beta1
kind: KnativeServing
metadata: { name: knative-serving }
spec:
  clusterProfileRef: { name: a, namespace: fleet-system }
  config:
    autoscalr:
      enable-scale-to-zero: "false"
  workloads:
    - name: activatr
      replicas: 3
`,
      },
      {
        path: "placements/serving.yaml",
        text: `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeServingPlacement
metadata: { name: serving }
spec:
  clusterProfiles: [{ name: b, namespace: fleet-system }]
  template:
    spec:
      config:
        autoscaler: { enable-scale-to-zro: "false" }
  overrides:
    - clusters: [{ name: b, namespace: fleet-system }]
      patch:
        workloads: [{ name: webhok, replicas: 2 }]
`,
      },
    ];
    const model = buildFleetModel(files, { defaultNamespace: "knative-fleet" });
    expect(model.diagnostics).toEqual([]);
    const { expandForSync } = await import("../../../src/placement/combine.ts");
    const expanded = expandForSync(
      model,
      { clusters: undefined, decisions: undefined, unknownReason: "none" },
      {},
    );
    const diagnostics = await checkFleetSettings(expanded.model.resources, files, releases);
    expect(diagnostics.map((d) => `${d.path}:${d.line}:${d.column} ${d.field}`)).toEqual([
      "clusters/a.yaml:7:5 spec.config.autoscalr",
      "clusters/a.yaml:10:13 spec.workloads[0].name",
      "placements/serving.yaml:9:23 spec.template.spec.config.autoscaler.enable-scale-to-zro",
      "placements/serving.yaml:13:29 spec.overrides[0].patch.workloads[0].name",
    ]);
  });
});

describe("placements whatever they select", () => {
  it("the template and each override, at the field that wrote the setting, each finding once", async () => {
    const text = `apiVersion: fleet.knative.dev/v1alpha1
kind: KnativeEventingPlacement
metadata: { name: eventing, namespace: knative-fleet }
spec:
  clusterSelectorTerms: [{ labelSelector: { matchLabels: { env: prod } } }]
  template:
    spec:
      source: { kafka: { enabled: true } }
      config:
        br-default: { default-br-config: x }
  overrides:
    - clusterSelector: { labelSelector: { matchLabels: { ring: canary } } }
      patch:
        workloads: [{ name: eventing-controler, replicas: 2 }]
    - clusterSelector: { labelSelector: { matchLabels: { ring: late } } }
      patch:
        config:
          logging: { loglevel.controller: debug }
`;
    const model = buildFleetModel([{ path: "placements/eventing.yaml", text }], {
      defaultNamespace: "knative-fleet",
    });
    expect(model.diagnostics).toEqual([]);
    const diagnostics = await checkPlacementSettings(model.placements, releases);
    expect(
      diagnostics.map(
        (d) => `${d.line}:${d.column} ${d.field} ${/did you mean (\S+)\?/.exec(d.message)?.[1]}`,
      ),
    ).toEqual([
      "10:9 spec.template.spec.config.br-default br-defaults",
      "14:29 spec.overrides[0].patch.workloads[0].name eventing-controller",
    ]);
  });
});
