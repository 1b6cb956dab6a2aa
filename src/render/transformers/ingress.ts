import type { KnativeServingSpec } from "../../api/knative.ts";
import {
  groupOf,
  isRecord,
  lookup,
  type Manifest,
  podTemplateOf,
  RenderError,
  setConfigMapData,
  type Transformer,
  updateWhere,
} from "../manifest.ts";

// The Serving networking layer: upstream's pkg/reconciler/knativeserving/ingress (kourier.go, istio.go,
// ingress_service.go). Which ingress manifests are included at all is decided when the release is loaded.

type IngressSpec = NonNullable<KnativeServingSpec["ingress"]>;
type KourierSpec = NonNullable<IngressSpec["kourier"]>;
type IstioSpec = NonNullable<IngressSpec["istio"]>;
type IstioGatewayOverride = IstioSpec["knative-ingress-gateway"];

const KOURIER_CONTROLLERS = new Set(["3scale-kourier-control", "net-kourier-controller"]);
const KOURIER_GATEWAY_NAMESPACE_ENV = "KOURIER_GATEWAY_NAMESPACE";
const KOURIER_GATEWAY_SERVICE = "kourier";
const KOURIER_GATEWAY_DEPLOYMENT = "3scale-kourier-gateway";
const KOURIER_DEFAULT_BOOTSTRAP = "kourier-bootstrap";

/** The gateway's Envoy bootstrap names the controller's xDS address in the release's own namespace. */
const KOURIER_BOOTSTRAP_KEY = "envoy-bootstrap.yaml";
const KOURIER_XDS_ADDRESS = "net-kourier-controller.knative-serving";

/**
 * Kourier: the controller looks for its gateway in its own namespace (upstream installs both into the CR's
 * namespace, not kourier-system), and the gateway's bootstrap finds the controller's xDS server there too;
 * the gateway Service takes spec.ingress.kourier's type, load-balancer IP and node ports; the gateway can
 * boot from another Envoy bootstrap ConfigMap.
 */
export function configureKourier(kourier: KourierSpec | undefined): Transformer {
  return (manifests) => {
    const withGatewayNamespace = updateWhere(
      manifests,
      (manifest) => manifest.kind === "Deployment" && KOURIER_CONTROLLERS.has(manifest.metadata.name ?? ""),
      (deployment) => {
        for (const container of podTemplateOf(deployment)?.spec.containers ?? []) {
          for (const envVar of container.env ?? []) {
            if (envVar.name === KOURIER_GATEWAY_NAMESPACE_ENV) envVar.value = deployment.metadata.namespace;
          }
        }
      },
    );
    const withBootstrap = updateWhere(
      withGatewayNamespace,
      (manifest) => manifest.kind === "ConfigMap" && manifest.metadata.name === KOURIER_DEFAULT_BOOTSTRAP,
      (configMap) => {
        const bootstrap = lookup(
          configMap.data as Record<string, unknown> | undefined,
          KOURIER_BOOTSTRAP_KEY,
        );
        if (typeof bootstrap !== "string") return;
        const address = `net-kourier-controller.${configMap.metadata.namespace}`;
        setConfigMapData(configMap, {
          [KOURIER_BOOTSTRAP_KEY]: bootstrap.replaceAll(KOURIER_XDS_ADDRESS, address),
        });
      },
    );
    const withService = updateWhere(
      withBootstrap,
      (manifest) => manifest.kind === "Service" && manifest.metadata.name === KOURIER_GATEWAY_SERVICE,
      (service) => configureGatewayService(service, kourier ?? {}),
    );
    const bootstrap = kourier?.["bootstrap-configmap"];
    if (!bootstrap) return withService;
    return updateWhere(
      withService,
      (manifest) => manifest.kind === "Deployment" && manifest.metadata.name === KOURIER_GATEWAY_DEPLOYMENT,
      (deployment) => {
        for (const volume of podTemplateOf(deployment)?.spec.volumes ?? []) {
          if (isRecord(volume.configMap) && volume.configMap.name === KOURIER_DEFAULT_BOOTSTRAP) {
            volume.configMap = { name: bootstrap };
          }
        }
      },
    );
  };
}

const SUPPORTED_SERVICE_TYPES = new Set(["ClusterIP", "LoadBalancer", "NodePort"]);

function configureGatewayService(service: Manifest, kourier: KourierSpec): void {
  const spec = (isRecord(service.spec) ? service.spec : {}) as {
    type?: string;
    loadBalancerIP?: string;
    ports?: { name?: string; nodePort?: number }[];
  };
  service.spec = spec;
  const serviceType = kourier["service-type"];
  if (serviceType) {
    if (serviceType === "ExternalName") throw new RenderError(`unsupported service type "${serviceType}"`);
    if (!SUPPORTED_SERVICE_TYPES.has(serviceType))
      throw new RenderError(`unknown service type "${serviceType}"`);
    spec.type = serviceType;
  }
  const loadBalancerIP = kourier["service-load-balancer-ip"];
  if (loadBalancerIP) {
    if (spec.type !== "LoadBalancer") {
      throw new RenderError(`cannot configure LoadBalancerIP for service type "${spec.type ?? ""}"`);
    }
    spec.loadBalancerIP = loadBalancerIP;
  }
  const httpPort = kourier["http-port"] ?? 0;
  const httpsPort = kourier["https-port"] ?? 0;
  if (httpPort > 0 || httpsPort > 0) {
    if (spec.type !== "NodePort") {
      throw new RenderError(`cannot configure HTTP(S)Port for service type "${spec.type ?? ""}"`);
    }
    for (const port of spec.ports ?? []) {
      if (port.name !== "https" && httpPort > 0) port.nodePort = httpPort;
      else if (port.name === "https" && httpsPort > 0) port.nodePort = httpsPort;
    }
  }
}

const ISTIO_GROUP = "networking.istio.io";
const INGRESS_GATEWAY = "knative-ingress-gateway";
const LOCAL_GATEWAY = "knative-local-gateway";
// The local gateway's name before net-istio 0.20.
const LEGACY_LOCAL_GATEWAY = "cluster-local-gateway";
const ISTIO_NAMESPACE = "istio-system";

/** Istio: spec.ingress.istio's selector and servers replace those of the Knative ingress and local Gateways. */
export function configureIstioGateways(istio: IstioSpec | undefined): Transformer {
  const overrideFor = (name: string | undefined): IstioGatewayOverride =>
    name === INGRESS_GATEWAY
      ? istio?.[INGRESS_GATEWAY]
      : name === LOCAL_GATEWAY || name === LEGACY_LOCAL_GATEWAY
        ? istio?.[LOCAL_GATEWAY]
        : undefined;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        manifest.kind === "Gateway" &&
        groupOf(manifest.apiVersion) === ISTIO_GROUP &&
        overrideFor(manifest.metadata.name) !== undefined,
      (gateway) => {
        const override = overrideFor(gateway.metadata.name)!;
        const spec = (isRecord(gateway.spec) ? gateway.spec : {}) as Record<string, unknown>;
        if (override.selector && Object.keys(override.selector).length > 0)
          spec.selector = { ...override.selector };
        if (override.servers?.length) spec.servers = structuredClone(override.servers);
        gateway.spec = spec;
      },
    );
}

/**
 * Upstream's IngressServiceTransform: the knative-local-gateway Service belongs to Istio's namespace
 * (istio-system, or the one config-istio's `local-gateway.<namespace>.knative-local-gateway` names), and the
 * gateway Services take the Gateway selector overrides.
 */
export function placeIstioGatewayServices(spec: KnativeServingSpec, namespace: string): Transformer {
  const localGatewayKey = `local-gateway.${namespace}.${LOCAL_GATEWAY}`;
  // Both spellings are read, the prefixed one last, as upstream does.
  const configuredAddress = [lookup(spec.config, "istio"), lookup(spec.config, "config-istio")]
    .map((entries) => lookup(entries, localGatewayKey))
    .findLast((address) => address !== undefined);
  // The address is `knative-local-gateway.<istio namespace>.svc.cluster.local`.
  const istioNamespace = configuredAddress?.split(".")[1] ?? ISTIO_NAMESPACE;
  const istio = spec.ingress?.istio;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        manifest.apiVersion === "v1" &&
        manifest.kind === "Service" &&
        (manifest.metadata.name === LOCAL_GATEWAY || manifest.metadata.name === INGRESS_GATEWAY),
      (service) => {
        const local = service.metadata.name === LOCAL_GATEWAY;
        if (local) service.metadata.namespace = istioNamespace;
        const selector = istio?.[local ? LOCAL_GATEWAY : INGRESS_GATEWAY]?.selector;
        if (selector && Object.keys(selector).length > 0 && isRecord(service.spec)) {
          service.spec.selector = { ...selector };
        }
      },
    );
}
