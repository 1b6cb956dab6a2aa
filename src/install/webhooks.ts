import { SERVICE_NAME_LABEL } from "../api/labels.ts";
import { isRecord, type KubeObject } from "../kube/object.ts";

// The built-in gate "the release's webhooks are served" (#39): Ready can be True while admission fails
// (knative/operator#1465, serving#10444), because a Deployment is Available before anything routes to it.
// Pure: which Services the desired objects' webhooks call, and which of them no ready endpoint serves.

/** The Service a webhook calls (`clientConfig.service`). */
export interface WebhookService {
  namespace: string;
  name: string;
}

const WEBHOOK_CONFIGURATIONS = new Set(["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]);

/**
 * The Services the desired objects' admission webhooks and CRD conversion webhooks call, once each, sorted
 * by namespace and name. A webhook called by URL has no Service and is left out.
 */
export function webhookServices(desired: readonly KubeObject[]): WebhookService[] {
  const found = new Map<string, WebhookService>();
  const add = (service: unknown) => {
    if (!isRecord(service) || typeof service.name !== "string" || typeof service.namespace !== "string") {
      return;
    }
    found.set(`${service.namespace}/${service.name}`, { namespace: service.namespace, name: service.name });
  };
  for (const object of desired) {
    if (WEBHOOK_CONFIGURATIONS.has(object.kind)) {
      const webhooks = Array.isArray(object.webhooks) ? object.webhooks : [];
      for (const webhook of webhooks) add(field(webhook, "clientConfig", "service"));
    } else if (object.kind === "CustomResourceDefinition") {
      add(field(object.spec, "conversion", "webhook", "clientConfig", "service"));
    }
  }
  return [...found.values()].sort((a, b) => compare(a.namespace, b.namespace) || compare(a.name, b.name));
}

/** The namespaces of `services`, once each, sorted. */
export const namespacesOf = (services: readonly WebhookService[]): string[] =>
  [...new Set(services.map((s) => s.namespace))].sort(compare);

interface Endpoint {
  addresses?: unknown[];
  conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
}

/**
 * An endpoint that takes traffic: it has an address and is ready. `ready` unset means ready (the API's
 * rule for an unknown state); a terminating endpoint counts only when explicitly ready (a Service with
 * publishNotReadyAddresses), as the EndpointSlice controller marks the others ready=false.
 */
export function isReadyEndpoint(endpoint: unknown): boolean {
  if (!isRecord(endpoint)) return false;
  const { addresses, conditions = {} } = endpoint as Endpoint;
  if (!Array.isArray(addresses) || addresses.length === 0) return false;
  if (conditions.ready === false) return false;
  return conditions.terminating !== true || conditions.ready === true;
}

/**
 * The webhook Services no EndpointSlice gives a ready endpoint, as the condition names them: `name`, or
 * `namespace/name` when the Services live in more than one namespace. A Service that does not exist has no
 * slice (the slices are owned by their Service and collected with it), so it is among them.
 */
export function unservedWebhooks(
  services: readonly WebhookService[],
  slices: readonly KubeObject[],
): string[] {
  const served = new Set<string>();
  for (const slice of slices) {
    const service = slice.metadata.labels?.[SERVICE_NAME_LABEL];
    const endpoints = Array.isArray(slice.endpoints) ? slice.endpoints : [];
    if (service && endpoints.some(isReadyEndpoint)) served.add(`${slice.metadata.namespace}/${service}`);
  }
  const qualified = namespacesOf(services).length > 1;
  return services
    .filter((s) => !served.has(`${s.namespace}/${s.name}`))
    .map((s) => (qualified ? `${s.namespace}/${s.name}` : s.name));
}

/** `kubernetes.io/service-name in (a,b)`: one list per namespace selects the slices of all its webhooks. */
export const endpointSliceSelector = (names: readonly string[]): string =>
  `${SERVICE_NAME_LABEL} in (${[...new Set(names)].sort(compare).join(",")})`;

function field(value: unknown, ...path: string[]): unknown {
  let at = value;
  for (const key of path) at = isRecord(at) ? at[key] : undefined;
  return at;
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
