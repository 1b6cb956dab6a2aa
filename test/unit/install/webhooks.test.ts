import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { type KnativeResource, KnativeResourceSchema } from "../../../src/api/knative.ts";
import { renderInstall } from "../../../src/install/desired.ts";
import { checkWebhooks } from "../../../src/install/health.ts";
import {
  endpointSliceSelector,
  isReadyEndpoint,
  unservedWebhooks,
  type WebhookService,
  webhookServices,
} from "../../../src/install/webhooks.ts";
import { isRecord, type KubeObject } from "../../../src/kube/object.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { crObject } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// The gate "the release's webhooks are served" (#39), pure part: which Services the real releases' webhooks
// call, and which of them a list of EndpointSlices leaves without a ready endpoint.

const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const KINDS = { KnativeServing: "knative-serving", KnativeEventing: "knative-eventing" } as const;
type Kind = keyof typeof KINDS;

const cr = (kind: Kind, version: string, spec: Record<string, unknown> = {}): KnativeResource =>
  KnativeResourceSchema.parse(crObject({ kind, name: "knative", cluster: "spoke-1", version, spec }));

async function desiredOf(
  kind: Kind,
  version: string,
  options: { namespace?: string; spec?: Record<string, unknown> } = {},
): Promise<readonly KubeObject[]> {
  const resource = cr(kind, version, options.spec);
  return renderInstall(resource, await releases.load(resource), options.namespace);
}

/** The folder of a release (`knative-serving/1.21.3`) or of an ingress (`ingress/1.21/istio`). */
const releaseFolder = (kind: Kind, version: string): string => {
  const folder = join(knativeReleasesDir(), KINDS[kind]);
  return join(folder, readdirSync(folder).find((v) => v.startsWith(`${version}.`))!);
};
const ingressFolder = (version: string, ingress: string): string =>
  join(knativeReleasesDir(), "ingress", version, ingress);

/**
 * What the release files declare, read without the code under test: every `clientConfig.service` anywhere
 * in the raw YAML of these folders, as `namespace/name`.
 */
function declaredInFiles(...folders: string[]): string[] {
  const found = new Set<string>();
  const walk = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(walk);
    if (!isRecord(value)) return;
    const service = isRecord(value.clientConfig) ? value.clientConfig.service : undefined;
    if (isRecord(service)) found.add(`${service.namespace}/${service.name}`);
    Object.values(value).forEach(walk);
  };
  for (const folder of folders) {
    for (const file of readdirSync(folder).filter((f) => f.endsWith(".yaml"))) {
      for (const doc of parseAllDocuments(readFileSync(join(folder, file), "utf8"))) walk(doc.toJS());
    }
  }
  return [...found].sort();
}

const keys = (services: readonly WebhookService[]) => services.map((s) => `${s.namespace}/${s.name}`);

describe("webhookServices: the Services the real releases' webhooks call", () => {
  const KOURIER = { ingress: { kourier: { enabled: true } } };
  const GATEWAY_API = { ingress: { "gateway-api": { enabled: true } } };
  for (const version of ["1.20", "1.21", "1.22", "1.23"]) {
    const check = async (kind: Kind, spec: Record<string, unknown>, expected: string[], ingress?: string) => {
      const desired = await desiredOf(kind, version, { spec });
      const services = webhookServices(desired);
      expect(keys(services)).toEqual(expected);
      const folders = [releaseFolder(kind, version), ...(ingress ? [ingressFolder(version, ingress)] : [])];
      expect(keys(services)).toEqual(declaredInFiles(...folders));
      // Every one of them is a Service of the install, with pods to select.
      for (const s of services) {
        const service = desired.find(
          (o) => o.kind === "Service" && o.metadata.name === s.name && o.metadata.namespace === s.namespace,
        );
        expect(isRecord(service?.spec) && service.spec.selector, `${s.name}'s selector`).toBeTruthy();
      }
    };

    it(`Serving ${version} (istio, the default ingress): webhook and net-istio-webhook`, () =>
      check("KnativeServing", {}, ["knative-serving/net-istio-webhook", "knative-serving/webhook"], "istio"));
    it(`Serving ${version} with kourier: webhook`, () =>
      check("KnativeServing", KOURIER, ["knative-serving/webhook"], "kourier"));
    it(`Serving ${version} with gateway-api: webhook and net-gateway-api-webhook`, () =>
      check(
        "KnativeServing",
        GATEWAY_API,
        ["knative-serving/net-gateway-api-webhook", "knative-serving/webhook"],
        "gateway-api",
      ));
    it(`Eventing ${version}: eventing-webhook and inmemorychannel-webhook`, () =>
      check("KnativeEventing", {}, [
        "knative-eventing/eventing-webhook",
        "knative-eventing/inmemorychannel-webhook",
      ]));
  }

  it("Eventing's CRD conversion webhooks count, and follow the install into another namespace", async () => {
    const desired = await desiredOf("KnativeEventing", "1.23");
    const conversions = desired.filter(
      (o) => o.kind === "CustomResourceDefinition" && webhookServices([o]).length > 0,
    );
    expect(conversions.length).toBeGreaterThan(0);
    expect(keys(webhookServices(conversions))).toEqual(["knative-eventing/eventing-webhook"]);

    const moved = await desiredOf("KnativeEventing", "1.23", { namespace: "team-eventing" });
    expect(keys(webhookServices(moved))).toEqual([
      "team-eventing/eventing-webhook",
      "team-eventing/inmemorychannel-webhook",
    ]);
  });

  it("leaves out a webhook called by URL, and objects that are not webhooks", () => {
    const config = (webhooks: unknown[]): KubeObject => ({
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: { name: "m" },
      webhooks,
    });
    expect(
      webhookServices([
        config([{ clientConfig: { url: "https://example.invalid/hook" } }, {}]),
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c", namespace: "x" } },
        config([{ clientConfig: { service: { namespace: "x", name: "b" } } }]),
        config([{ clientConfig: { service: { namespace: "x", name: "b" } } }]),
      ]),
    ).toEqual([{ namespace: "x", name: "b" }]);
  });
});

describe("unservedWebhooks: which webhook Services have no ready endpoint", () => {
  const services: WebhookService[] = [
    { namespace: "knative-eventing", name: "eventing-webhook" },
    { namespace: "knative-eventing", name: "inmemorychannel-webhook" },
  ];
  const slice = (service: string, endpoints: unknown[], namespace = "knative-eventing"): KubeObject => ({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: `${service}-abcde`, namespace, labels: { "kubernetes.io/service-name": service } },
    addressType: "IPv4",
    endpoints,
  });
  const ready = { addresses: ["10.0.0.7"], conditions: { ready: true, serving: true, terminating: false } };

  it("an endpoint is ready with an address and ready true or absent; not ready false, terminating, or addressless", () => {
    expect(isReadyEndpoint(ready)).toBe(true);
    expect(isReadyEndpoint({ addresses: ["10.0.0.7"] }), "no conditions: unknown is ready").toBe(true);
    expect(isReadyEndpoint({ addresses: ["10.0.0.7"], conditions: {} })).toBe(true);
    expect(isReadyEndpoint({ addresses: ["10.0.0.7"], conditions: { ready: false, serving: true } })).toBe(
      false,
    );
    expect(
      isReadyEndpoint({ addresses: ["10.0.0.7"], conditions: { serving: true, terminating: true } }),
      "terminating, ready unset",
    ).toBe(false);
    expect(
      isReadyEndpoint({ addresses: ["10.0.0.7"], conditions: { ready: true, terminating: true } }),
      "publishNotReadyAddresses keeps a terminating endpoint ready",
    ).toBe(true);
    expect(isReadyEndpoint({ addresses: [], conditions: { ready: true } })).toBe(false);
    expect(isReadyEndpoint({ conditions: { ready: true } })).toBe(false);
    expect(isReadyEndpoint(null)).toBe(false);
  });

  it("both served: nothing waits", () => {
    expect(
      unservedWebhooks(services, [
        slice("eventing-webhook", [ready]),
        slice("inmemorychannel-webhook", [ready]),
      ]),
    ).toEqual([]);
  });

  it("no slice at all (no Service, or the EndpointSlice controller has not run): every one waits", () => {
    expect(unservedWebhooks(services, [])).toEqual(["eventing-webhook", "inmemorychannel-webhook"]);
  });

  it("one ready endpoint among not-ready ones, in any slice of the Service, serves it", () => {
    const notReady = { addresses: ["10.0.0.8"], conditions: { ready: false } };
    expect(
      unservedWebhooks(services, [
        slice("eventing-webhook", [notReady]),
        slice("eventing-webhook", [notReady, ready]),
        slice("inmemorychannel-webhook", [notReady]),
      ]),
    ).toEqual(["inmemorychannel-webhook"]);
  });

  it("slices with no endpoints, addressless, terminating or not-ready endpoints serve nothing", () => {
    expect(
      unservedWebhooks(services, [
        slice("eventing-webhook", []),
        { ...slice("eventing-webhook", []), endpoints: undefined },
        slice("eventing-webhook", [{ addresses: [], conditions: { ready: true } }]),
        slice("eventing-webhook", [{ addresses: ["10.0.0.9"], conditions: { terminating: true } }]),
        slice("inmemorychannel-webhook", [{ addresses: ["10.0.0.9"], conditions: { ready: false } }]),
      ]),
    ).toEqual(["eventing-webhook", "inmemorychannel-webhook"]);
  });

  it("a slice of another Service, of the same name in another namespace, or unlabelled, serves nothing", () => {
    const unlabelled = slice("eventing-webhook", [ready]);
    unlabelled.metadata.labels = {};
    expect(
      unservedWebhooks(services, [
        slice("eventing-controller", [ready]),
        slice("eventing-webhook", [ready], "default"),
        unlabelled,
      ]),
    ).toEqual(["eventing-webhook", "inmemorychannel-webhook"]);
  });

  it("Services in two namespaces are named with their namespace", () => {
    expect(
      unservedWebhooks(
        [...services, { namespace: "other", name: "webhook" }],
        [slice("eventing-webhook", [ready])],
      ),
    ).toEqual(["knative-eventing/inmemorychannel-webhook", "other/webhook"]);
  });

  it("one list per namespace selects the slices of all its webhook Services", () => {
    expect(endpointSliceSelector(["inmemorychannel-webhook", "eventing-webhook", "eventing-webhook"])).toBe(
      "kubernetes.io/service-name in (eventing-webhook,inmemorychannel-webhook)",
    );
  });
});

describe("checkWebhooks: the list on the cluster", () => {
  async function eventingCluster() {
    const desired = await desiredOf("KnativeEventing", "1.22");
    const fake = new FakeKube().serveKindsOf(desired);
    for (const o of desired) fake.put(structuredClone(o));
    return { fake, desired };
  }

  it("one list per namespace, served when every webhook Service has a ready endpoint", async () => {
    const { fake, desired } = await eventingCluster();
    fake.resetCounts();
    expect(await checkWebhooks(fake.client, desired)).toEqual({
      unserved: ["eventing-webhook", "inmemorychannel-webhook"],
    });
    // The discovery of discovery.k8s.io/v1 once, then one list.
    expect(fake.requests()).toEqual({ reads: 2, writes: 0 });
    fake.makeServicesServed();
    fake.resetCounts();
    expect(await checkWebhooks(fake.client, desired)).toBeUndefined();
    expect(fake.requests()).toEqual({ reads: 1, writes: 0 });
    fake.remove("EndpointSlice", "inmemorychannel-webhook-fake");
    expect(await checkWebhooks(fake.client, desired)).toEqual({ unserved: ["inmemorychannel-webhook"] });
  });

  it("a release without webhooks sends nothing", async () => {
    const fake = new FakeKube();
    expect(
      await checkWebhooks(fake.client, [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }]),
    ).toBeUndefined();
    expect(fake.requests()).toEqual({ reads: 0, writes: 0 });
  });

  it("a forbidden list is no crash: it says which namespaces cannot be verified", async () => {
    const { fake, desired } = await eventingCluster();
    fake.makeServicesServed();
    fake.forbid("endpointslices");
    expect(await checkWebhooks(fake.client, desired)).toEqual({ forbidden: ["knative-eventing"] });
  });
});
