import { type Document, parseDocument, stringify } from "yaml";
import type { CommonSpec } from "../../api/knative.ts";
import {
  field,
  groupOf,
  lookup,
  type Manifest,
  podTemplateOf,
  RenderError,
  setConfigMapData,
  type Transformer,
  unchanged,
  updateWhere,
} from "../manifest.ts";

// Eventing specifics: upstream's pkg/reconciler/knativeeventing/common (defaultbroker.go,
// sinkbindingselectionmode.go) and eventing_tls.go.

const BROKER_DEFAULTS_CONFIGMAP = "config-br-defaults";
const BROKER_DEFAULTS_KEY = "default-br-config";
const BROKER_CLASS_PATH = ["clusterDefault", "brokerClass"];
const MT_CHANNEL_BASED_BROKER = "MTChannelBasedBroker";

function brokerDefaults(configMap: Manifest): Document.Parsed {
  const text = field(configMap.data, BROKER_DEFAULTS_KEY);
  return parseDocument(typeof text === "string" ? text : "");
}

/**
 * The cluster-wide default Broker class in config-br-defaults: spec.defaultBrokerClass, MTChannelBasedBroker
 * when unset (so it also overrides a class set through spec.config, as upstream does). Upstream decodes the
 * YAML and encodes it again every time (Go's sigs.k8s.io/yaml: keys sorted, lists not indented), so the text
 * is written the same way: the same bytes in both, whoever installed the cluster.
 */
export function setDefaultBrokerClass(defaultBrokerClass: string | undefined): Transformer {
  const brokerClass = defaultBrokerClass || MT_CHANNEL_BASED_BROKER;
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.kind === "ConfigMap" && manifest.metadata.name === BROKER_DEFAULTS_CONFIGMAP,
      (configMap) => {
        const defaults = brokerDefaults(configMap);
        const [error] = defaults.errors;
        if (error)
          throw new RenderError(`${BROKER_DEFAULTS_CONFIGMAP} ${BROKER_DEFAULTS_KEY}: ${error.message}`);
        defaults.setIn(BROKER_CLASS_PATH, brokerClass);
        setConfigMapData(configMap, { [BROKER_DEFAULTS_KEY]: goYaml(defaults.toJS()) });
      },
    );
}

/** YAML as Go's sigs.k8s.io/yaml writes it: map keys sorted, sequences at their key's indentation. */
function goYaml(value: unknown): string {
  return stringify(value, { sortMapEntries: true, indentSeq: false, lineWidth: 0 });
}

const SINK_BINDING_WEBHOOK = "eventing-webhook";
const SINK_BINDING_SELECTION_MODE = "SINK_BINDING_SELECTION_MODE";

/** spec.sinkBindingSelectionMode (default `exclusion`) as the eventing-webhook containers' env var. */
export function setSinkBindingSelectionMode(mode: string | undefined): Transformer {
  const value = mode || "exclusion";
  const containersOf = (manifest: Manifest) => podTemplateOf(manifest)?.spec.containers ?? [];
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) =>
        manifest.kind === "Deployment" &&
        manifest.metadata.name === SINK_BINDING_WEBHOOK &&
        containersOf(manifest).some(
          (container) =>
            container.env?.find((envVar) => envVar.name === SINK_BINDING_SELECTION_MODE)?.value !== value,
        ),
      (deployment) => {
        for (const container of containersOf(deployment)) {
          const envVar = container.env?.find((candidate) => candidate.name === SINK_BINDING_SELECTION_MODE);
          if (envVar) envVar.value = value;
          else container.env = [...(container.env ?? []), { name: SINK_BINDING_SELECTION_MODE, value }];
        }
      },
    );
}

const CERT_MANAGER_GROUP = "cert-manager.io";
const ENCRYPTED_TRANSPORT = new Set(["permissive", "strict"]);

/**
 * Leaves out the cert-manager objects (the eventing TLS certificates) unless config-features turns
 * transport-encryption on: without it they are unused, and installing them would require cert-manager.
 */
export function dropUnusedTlsCertificates(config: CommonSpec["config"]): Transformer {
  const features = lookup(config, "features") ?? lookup(config, "config-features");
  const transportEncryption = lookup(features, "transport-encryption")?.trim().toLowerCase() ?? "";
  if (ENCRYPTED_TRANSPORT.has(transportEncryption)) return unchanged;
  return (manifests) => manifests.filter((manifest) => groupOf(manifest.apiVersion) !== CERT_MANAGER_GROUP);
}
