import { isDeepStrictEqual } from "node:util";
import { describe, expect, it } from "vitest";
import { type Manifest, RenderError } from "../../../src/render/index.ts";
import { podTemplateOf } from "../../../src/render/manifest.ts";
import { applyConfig } from "../../../src/render/transformers/config.ts";
import { nameJobs } from "../../../src/render/transformers/jobs.ts";
import { injectNamespace, isClusterScoped } from "../../../src/render/transformers/namespace.ts";
import { applyRegistry, imageName } from "../../../src/render/transformers/registry.ts";
import {
  container,
  dataOf,
  find,
  knativeServing,
  NAME_PLACEHOLDER,
  podTemplate,
  releases,
  renderEventing,
  renderServing,
} from "./fixtures.ts";

const servingRelease = async () => (await releases.load(knativeServing())).manifests;
const kourier = { ingress: { kourier: { enabled: true } } };

/** The objects `after` changed relative to `before`, by position (transformers keep the order). */
function changed(before: readonly Manifest[], after: readonly Manifest[]): string[] {
  return after.flatMap((manifest, index) =>
    isDeepStrictEqual(manifest, before[index]) ? [] : [`${manifest.kind}/${manifest.metadata.name}`],
  );
}

describe("namespace", () => {
  it("moves every namespaced object into the CR's namespace and leaves cluster-scoped ones without", async () => {
    const manifests = await renderServing(kourier, "serving-system");
    for (const manifest of manifests) {
      expect(manifest.metadata.namespace, `${manifest.kind}/${manifest.metadata.name}`).toBe(
        isClusterScoped(manifest.kind) ? undefined : "serving-system",
      );
    }
    // kourier-system's objects come along, as with the upstream operator.
    expect(find(manifests, "Service", "kourier").metadata.namespace).toBe("serving-system");
  });

  it("renames the release's Namespace objects to it, leaving one", async () => {
    const manifests = await renderServing(kourier, "serving-system");
    expect(
      manifests.filter((manifest) => manifest.kind === "Namespace").map((ns) => ns.metadata.name),
    ).toEqual(["serving-system"]);
  });

  it("points binding subjects and webhook, APIService and conversion services at it", async () => {
    const serving = await renderServing({}, "serving-system");
    expect(find(serving, "ClusterRoleBinding", "knative-serving-controller-admin").subjects).toEqual([
      { kind: "ServiceAccount", name: "controller", namespace: "serving-system" },
    ]);
    expect(
      find(serving, "ValidatingWebhookConfiguration", "config.webhook.serving.knative.dev").webhooks,
    ).toEqual([
      expect.objectContaining({
        clientConfig: { service: { name: "webhook", namespace: "serving-system" } },
      }),
    ]);
    const eventing = await renderEventing({}, "eventing-system");
    expect(find(eventing, "CustomResourceDefinition", "pingsources.sources.knative.dev").spec).toMatchObject({
      conversion: {
        webhook: { clientConfig: { service: { name: "eventing-webhook", namespace: "eventing-system" } } },
      },
    });
  });

  it("never changes its input", async () => {
    const release = await servingRelease();
    const before = structuredClone(release);
    injectNamespace("elsewhere")(release);
    expect(release).toEqual(before);
  });

  it("adds spec.namespace's labels and annotations to the Namespace", async () => {
    const manifests = await renderServing({
      namespace: { labels: { team: "platform" }, annotations: { a: "b" } },
    });
    expect(find(manifests, "Namespace", "knative-serving").metadata).toMatchObject({
      labels: { team: "platform", "app.kubernetes.io/name": "knative-serving" },
      annotations: { a: "b" },
    });
  });
});

describe("config", () => {
  it("merges spec.config into the ConfigMaps, by name with or without the config- prefix", async () => {
    const release = await servingRelease();
    const configured = applyConfig({
      deployment: { "progress-deadline": "120s" },
      "config-autoscaler": { "enable-scale-to-zero": "false" },
    })(release);
    expect(changed(release, configured)).toEqual([
      "ConfigMap/config-autoscaler",
      "ConfigMap/config-deployment",
    ]);
    const deployment = dataOf(configured, "config-deployment");
    expect(deployment["progress-deadline"]).toBe("120s");
    // The release's own keys stay.
    expect(deployment["queue-sidecar-image"]).toBe(
      dataOf(release, "config-deployment")["queue-sidecar-image"],
    );
    expect(dataOf(configured, "config-autoscaler")["enable-scale-to-zero"]).toBe("false");
  });
});

describe("registry", () => {
  it("overrides exactly the named container's image", async () => {
    const release = await servingRelease();
    const overridden = applyRegistry({ override: { activator: "registry.example/activator:v1" } })(release);
    expect(changed(release, overridden)).toEqual(["Deployment/activator"]);
    expect(container(overridden, "activator").image).toBe("registry.example/activator:v1");
  });

  it("prefers a workload/container key over a container key", async () => {
    const manifests = await renderServing({
      registry: { override: { controller: "plain", "controller/controller": "qualified" } },
    });
    expect(container(manifests, "controller").image).toBe("qualified");
  });

  it("builds the other images from default, the name placeholder being the release image's name", async () => {
    const manifests = await renderServing({
      registry: {
        default: `mirror.example/knative/${NAME_PLACEHOLDER}:1.22`,
        override: { webhook: "special" },
      },
    });
    expect(container(manifests, "controller").image).toBe("mirror.example/knative/controller:1.22");
    expect(container(manifests, "webhook").image).toBe("special");
    // The caching Image queue-proxy holds the `queue` image.
    expect(find(manifests, "Image", "queue-proxy").spec).toMatchObject({
      image: "mirror.example/knative/queue:1.22",
    });
    expect(imageName("gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:b1af")).toBe("queue");
    expect(imageName("busybox:1.36")).toBe("");
  });

  it("adds imagePullSecrets to every pod spec and caching Image", async () => {
    const manifests = await renderServing({ registry: { imagePullSecrets: [{ name: "regcred" }] } });
    const withPods = manifests.filter((manifest) => podTemplateOf(manifest));
    expect(withPods.length).toBeGreaterThan(0);
    for (const workload of withPods) {
      expect(podTemplateOf(workload)!.spec.imagePullSecrets).toEqual([{ name: "regcred" }]);
    }
    expect(find(manifests, "Image", "queue-proxy").spec).toMatchObject({
      imagePullSecrets: [{ name: "regcred" }],
    });
  });
});

describe("workloads", () => {
  it("sets replicas, labels, annotations and scheduling on the named Deployment and its pods", async () => {
    const tolerations = [{ key: "dedicated", operator: "Exists", effect: "NoSchedule" }];
    const affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } };
    const manifests = await renderServing({
      workloads: [
        {
          name: "controller",
          replicas: 3,
          labels: { tier: "control" },
          annotations: { note: "x" },
          nodeSelector: { pool: "system" },
          tolerations,
          affinity,
        },
      ],
    });
    const controller = find(manifests, "Deployment", "controller");
    expect(controller.spec).toMatchObject({ replicas: 3 });
    expect(controller.metadata).toMatchObject({ labels: { tier: "control" }, annotations: { note: "x" } });
    const pod = podTemplate(manifests, "Deployment", "controller");
    expect(pod.metadata).toMatchObject({
      labels: { tier: "control", app: "controller" },
      annotations: { note: "x" },
    });
    expect(pod.spec).toMatchObject({ nodeSelector: { pool: "system" }, tolerations, affinity });
  });

  it("leaves replicas to the HPA of an autoscaled Deployment and raises the HPA instead", async () => {
    const manifests = await renderServing({ workloads: [{ name: "activator", replicas: 3 }] });
    expect(find(manifests, "Deployment", "activator").spec).not.toHaveProperty("replicas");
    expect(find(manifests, "HorizontalPodAutoscaler", "activator").spec).toMatchObject({
      minReplicas: 3,
      maxReplicas: 22,
    });
  });

  it("merges container resources key by key and env vars by name", async () => {
    const release = await servingRelease();
    const manifests = await renderServing({
      workloads: [
        {
          name: "controller",
          resources: [{ container: "controller", limits: { memory: "2Gi" } }],
          env: [
            {
              container: "controller",
              envVars: [
                { name: "CONFIG_LOGGING_NAME", value: "my-logging" },
                { name: "EXTRA", value: "1" },
              ],
            },
          ],
        },
      ],
    });
    const { resources, env } = container(manifests, "controller");
    const released = container(release, "controller");
    expect(resources).toEqual({
      ...released.resources,
      limits: { ...released.resources!.limits, memory: "2Gi" },
    });
    expect(env?.map((envVar) => envVar.name)).toEqual([
      ...released.env!.map((envVar) => envVar.name),
      "EXTRA",
    ]);
    expect(env?.find((envVar) => envVar.name === "CONFIG_LOGGING_NAME")?.value).toBe("my-logging");
  });

  it("sets probe timings, and removes a probe whose override has none", async () => {
    const manifests = await renderServing({
      workloads: [
        {
          name: "controller",
          readinessProbes: [{ container: "controller", periodSeconds: 15, initialDelaySeconds: 0 }],
          livenessProbes: [{ container: "controller" }],
        },
      ],
    });
    const controller = container(manifests, "controller");
    expect(controller.readinessProbe).toMatchObject({ periodSeconds: 15, failureThreshold: 3, httpGet: {} });
    expect(controller).not.toHaveProperty("livenessProbe");
  });

  it("runs pods in the host network with the matching DNS policy", async () => {
    const manifests = await renderServing({ workloads: [{ name: "webhook", hostNetwork: true }] });
    expect(podTemplate(manifests, "Deployment", "webhook").spec).toMatchObject({
      hostNetwork: true,
      dnsPolicy: "ClusterFirstWithHostNet",
    });
  });

  it("applies the deprecated spec.deployments and spec.resources too", async () => {
    const manifests = await renderServing({
      deployments: [{ name: "autoscaler", replicas: 2 }],
      resources: [{ container: "webhook", requests: { cpu: "1" } }],
    });
    expect(find(manifests, "Deployment", "autoscaler").spec).toMatchObject({ replicas: 2 });
    expect(container(manifests, "webhook").resources?.requests).toMatchObject({ cpu: "1" });
  });
});

describe("high availability", () => {
  it("scales the Deployments that support it and raises the HPAs of the autoscaled ones", async () => {
    const manifests = await renderServing({ "high-availability": { replicas: 3 } });
    expect(find(manifests, "Deployment", "controller").spec).toMatchObject({ replicas: 3 });
    expect(find(manifests, "Deployment", "webhook").spec).not.toHaveProperty("replicas");
    expect(find(manifests, "HorizontalPodAutoscaler", "webhook").spec).toMatchObject({
      minReplicas: 3,
      maxReplicas: 7,
    });
  });

  it("yields to a workload override's replicas", async () => {
    const manifests = await renderServing({
      "high-availability": { replicas: 3 },
      workloads: [{ name: "controller", replicas: 1 }],
    });
    expect(find(manifests, "Deployment", "controller").spec).toMatchObject({ replicas: 1 });
    expect(find(manifests, "Deployment", "autoscaler").spec).toMatchObject({ replicas: 3 });
  });

  it("leaves the PingSource adapter alone, and an HPA whose minimum already suffices", async () => {
    const manifests = await renderEventing({ "high-availability": { replicas: 1 } });
    expect(find(manifests, "Deployment", "pingsource-mt-adapter").spec).toMatchObject({ replicas: 0 });
    expect(find(manifests, "Deployment", "eventing-controller").spec).toMatchObject({ replicas: 1 });
    expect(find(manifests, "HorizontalPodAutoscaler", "broker-ingress-hpa").spec).toMatchObject({
      minReplicas: 1,
      maxReplicas: 10,
    });
  });
});

describe("jobs", () => {
  it("names the post-install Jobs after the component and version and keeps them out of the mesh", async () => {
    const manifests = await renderServing({ version: "1.21" });
    const jobs = manifests.filter((manifest) => manifest.kind === "Job");
    expect(jobs.map((job) => job.metadata.name)).toEqual([
      "storage-version-migration-serving-serving-1.21.3",
      "cleanup-serving-serving-1.21.3",
    ]);
    // The releases keep them out of an Istio mesh with a template label, which stays the only marker: the
    // template is immutable, so a Job the upstream operator created could not be taken over otherwise.
    for (const job of jobs) {
      expect(podTemplateOf(job)?.metadata?.labels).toMatchObject({ "sidecar.istio.io/inject": "false" });
      expect(podTemplateOf(job)?.metadata?.annotations).toBeUndefined();
    }
  });

  it("labels a Job template that says nothing about Istio, and keeps what one says", () => {
    const job = (templateMetadata: object): Manifest => ({
      apiVersion: "batch/v1",
      kind: "Job",
      metadata: { generateName: "extra-" },
      spec: { template: { metadata: templateMetadata, spec: { containers: [{ name: "x" }] } } },
    });
    const [plain, annotated] = nameJobs(
      "knative-eventing",
      "1.22.2",
    )([job({}), job({ annotations: { "sidecar.istio.io/inject": "true" } })]);
    expect(plain?.metadata.name).toBe("extra-eventing-1.22.2");
    expect(podTemplateOf(plain!)?.metadata).toEqual({ labels: { "sidecar.istio.io/inject": "false" } });
    expect(podTemplateOf(annotated!)?.metadata).toEqual({
      annotations: { "sidecar.istio.io/inject": "true" },
    });
  });
});

describe("services and PodDisruptionBudgets", () => {
  it("merges labels, annotations and selector into the named Service", async () => {
    const manifests = await renderServing({
      services: [{ name: "controller", labels: { a: "1" }, annotations: { b: "2" }, selector: { c: "3" } }],
    });
    const service = find(manifests, "Service", "controller");
    expect(service.metadata).toMatchObject({ labels: { a: "1" }, annotations: { b: "2" } });
    expect(service.spec).toMatchObject({ selector: { app: "controller", c: "3" } });
  });

  it("sets minAvailable on the named PodDisruptionBudget", async () => {
    const manifests = await renderServing({
      podDisruptionBudgets: [{ name: "activator-pdb", minAvailable: 1 }],
    });
    expect(find(manifests, "PodDisruptionBudget", "activator-pdb").spec).toMatchObject({ minAvailable: 1 });
    expect(find(manifests, "PodDisruptionBudget", "webhook-pdb").spec).toMatchObject({ minAvailable: "80%" });
  });
});

describe("ingress", () => {
  it("leaves config-network's ingress class to spec.config, as upstream does", async () => {
    // A default here would move a cluster's traffic at a hand-over from the upstream operator.
    expect(dataOf(await renderServing(kourier), "config-network")).not.toHaveProperty("ingress-class");
    const chosen = await renderServing({
      ...kourier,
      config: { network: { "ingress-class": "kourier.ingress.networking.knative.dev" } },
    });
    expect(dataOf(chosen, "config-network")["ingress-class"]).toBe("kourier.ingress.networking.knative.dev");
  });

  it("points the Kourier gateway's bootstrap at the controller in the install namespace", async () => {
    const bootstrap = (manifests: readonly Manifest[]) =>
      dataOf(manifests, "kourier-bootstrap")["envoy-bootstrap.yaml"]!;
    const moved = bootstrap(await renderServing(kourier, "serving-system"));
    expect(moved).toContain('address: "net-kourier-controller.serving-system"');
    expect(moved).not.toContain("knative-serving");
    expect(bootstrap(await renderServing(kourier))).toContain(
      'address: "net-kourier-controller.knative-serving"',
    );
  });

  it("configures the Kourier gateway Service and tells the controller where the gateway runs", async () => {
    const manifests = await renderServing(
      {
        ingress: {
          kourier: { enabled: true, "service-type": "NodePort", "http-port": 30080, "https-port": 30443 },
        },
      },
      "serving-system",
    );
    expect(find(manifests, "Service", "kourier").spec).toMatchObject({
      type: "NodePort",
      ports: [
        { name: "http2", nodePort: 30080 },
        { name: "https", nodePort: 30443 },
      ],
    });
    expect(container(manifests, "net-kourier-controller", "controller").env).toContainEqual({
      name: "KOURIER_GATEWAY_NAMESPACE",
      value: "serving-system",
    });
  });

  it("refuses Kourier settings the Service type cannot take", async () => {
    await expect(
      renderServing({ ingress: { kourier: { enabled: true, "service-type": "ExternalName" } } }),
    ).rejects.toThrow(new RenderError('unsupported service type "ExternalName"'));
    await expect(
      renderServing({
        ingress: { kourier: { enabled: true, "service-type": "ClusterIP", "http-port": 30080 } },
      }),
    ).rejects.toThrow('cannot configure HTTP(S)Port for service type "ClusterIP"');
  });

  it("boots the Kourier gateway from another bootstrap ConfigMap", async () => {
    const manifests = await renderServing({
      ingress: { kourier: { enabled: true, "bootstrap-configmap": "my-envoy" } },
    });
    expect(podTemplate(manifests, "Deployment", "3scale-kourier-gateway").spec.volumes).toEqual([
      { name: "config-volume", configMap: { name: "my-envoy" } },
    ]);
  });

  it("overrides the Istio gateways and keeps the local gateway Service in Istio's namespace", async () => {
    const manifests = await renderServing(
      {
        ingress: {
          istio: { enabled: true, "knative-ingress-gateway": { selector: { istio: "custom-gateway" } } },
        },
        config: {
          istio: { "local-gateway.serving-system.knative-local-gateway": "knative-local-gateway.mesh.svc" },
        },
      },
      "serving-system",
    );
    expect(find(manifests, "Gateway", "knative-ingress-gateway").spec).toMatchObject({
      selector: { istio: "custom-gateway" },
    });
    expect(find(manifests, "Gateway", "knative-local-gateway").spec).toMatchObject({
      selector: { istio: "ingressgateway" },
    });
    expect(find(manifests, "Service", "knative-local-gateway").metadata.namespace).toBe("mesh");
    const plain = await renderServing({}, "serving-system");
    expect(find(plain, "Service", "knative-local-gateway").metadata.namespace).toBe("istio-system");
  });
});

describe("eventing", () => {
  it("sets the default Broker class in config-br-defaults, written as upstream re-encodes it", async () => {
    const defaults = await renderEventing({ defaultBrokerClass: "Kafka" });
    // Upstream's text for the 1.22 release (read back from a spoke it installed): keys sorted, Go's layout.
    const upstreamText = (brokerClass: string) =>
      "clusterDefault:\n  apiVersion: v1\n" +
      `  brokerClass: ${brokerClass}\n` +
      "  delivery:\n    backoffDelay: PT0.2S\n    backoffPolicy: exponential\n    retry: 10\n" +
      "  kind: ConfigMap\n  name: config-br-default-channel\n  namespace: knative-eventing\n";
    expect(dataOf(defaults, "config-br-defaults")["default-br-config"]).toBe(upstreamText("Kafka"));
    expect(dataOf(await renderEventing(), "config-br-defaults")["default-br-config"]).toBe(
      upstreamText("MTChannelBasedBroker"),
    );
  });

  it("passes the SinkBinding selection mode to the eventing webhook", async () => {
    const manifests = await renderEventing({ sinkBindingSelectionMode: "inclusion" });
    expect(container(manifests, "eventing-webhook").env).toContainEqual({
      name: "SINK_BINDING_SELECTION_MODE",
      value: "inclusion",
    });
  });

  it("installs the cert-manager Certificates only when transport encryption is on", async () => {
    const certificates = (manifests: readonly Manifest[]) =>
      manifests.filter((manifest) => manifest.apiVersion.startsWith("cert-manager.io/")).length;
    expect(certificates(await renderEventing())).toBe(0);
    expect(
      certificates(await renderEventing({ config: { features: { "transport-encryption": "strict" } } })),
    ).toBe(4);
  });
});

describe("controller custom certs", () => {
  it("mounts the CA bundle into the Serving controller", async () => {
    const manifests = await renderServing({ "controller-custom-certs": { type: "Secret", name: "corp-ca" } });
    expect(podTemplate(manifests, "Deployment", "controller").spec.volumes).toContainEqual({
      name: "custom-certs-corp-ca",
      secret: { secretName: "corp-ca" },
    });
    const controller = container(manifests, "controller");
    expect(controller.volumeMounts).toContainEqual({
      name: "custom-certs-corp-ca",
      mountPath: "/custom-certs",
    });
    expect(controller.env).toContainEqual({ name: "SSL_CERT_DIR", value: "/custom-certs" });
    await expect(renderServing({ "controller-custom-certs": { type: "Volume", name: "x" } })).rejects.toThrow(
      "Unknown CustomCerts type: Volume",
    );
  });
});

describe("labels", () => {
  it("labels every object with its component's name where the release does not", async () => {
    for (const manifests of [await renderServing(kourier), await renderEventing()]) {
      for (const manifest of manifests) {
        expect(
          manifest.metadata.labels?.["app.kubernetes.io/name"],
          `${manifest.kind}/${manifest.metadata.name}`,
        ).toMatch(/^knative-(serving|eventing)$/);
      }
    }
    const certificate = find(await renderServing(), "Certificate", "routing-serving-certs");
    expect(certificate.metadata.labels).toEqual({
      "networking.knative.dev/certificate-type": "system-internal",
      "app.kubernetes.io/name": "knative-serving",
    });
  });
});
