import type { KnativeServingSpec } from "../../api/knative.ts";
import { podTemplateOf, RenderError, type Transformer, unchanged, updateWhere } from "../manifest.ts";

const CONTROLLER = "controller";
const MOUNT_PATH = "/custom-certs";

/**
 * Upstream's CustomCertsTransform (knativeserving/common/certs.go): the Serving controller trusts the CA
 * certificates of spec.controller-custom-certs (a ConfigMap or Secret) when it resolves image digests.
 */
export function configureControllerCustomCerts(
  certs: KnativeServingSpec["controller-custom-certs"],
): Transformer {
  if (!certs || (certs.type === "" && certs.name === "")) return unchanged;
  const { type, name } = certs;
  if (type !== "ConfigMap" && type !== "Secret") throw new RenderError(`Unknown CustomCerts type: ${type}`);
  if (name === "") throw new RenderError(`CustomCerts name for ${type} is required`);
  const volumeName = `custom-certs-${name}`;
  const source = type === "ConfigMap" ? { configMap: { name } } : { secret: { secretName: name } };
  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => manifest.kind === "Deployment" && manifest.metadata.name === CONTROLLER,
      (deployment) => {
        const pod = podTemplateOf(deployment)?.spec;
        const [container] = pod?.containers ?? [];
        if (!pod || !container) return;
        pod.volumes = [...(pod.volumes ?? []), { name: volumeName, ...source }];
        container.volumeMounts = [
          ...(container.volumeMounts ?? []),
          { name: volumeName, mountPath: MOUNT_PATH },
        ];
        container.env = [...(container.env ?? []), { name: "SSL_CERT_DIR", value: MOUNT_PATH }];
      },
    );
}
