import type { Registry } from "../../api/knative.ts";
import {
  isRecord,
  lookup,
  type Manifest,
  podTemplateOf,
  type Transformer,
  unchanged,
  updateWhere,
} from "../manifest.ts";

// Upstream's ImageTransform (pkg/reconciler/common/images.go): container images of Deployments, DaemonSets,
// StatefulSets and Jobs, and caching.internal.knative.dev Images, are pointed at spec.registry.

const CACHING_IMAGE_API_VERSION = "caching.internal.knative.dev/v1alpha1";
// biome-ignore lint/suspicious/noTemplateCurlyInString: upstream's placeholder, literally.
const NAME_VARIABLE = "${NAME}";

function isCachingImage(manifest: Manifest): boolean {
  return (
    manifest.kind === "Image" && manifest.apiVersion === CACHING_IMAGE_API_VERSION && isRecord(manifest.spec)
  );
}

/**
 * Rewrites images per spec.registry. A container's image is, in order: `override["<workload>/<container>"]`,
 * `override["<container>"]`, else `default` with ${NAME} replaced. Env vars named like an override key get
 * that image as value (sidecar images passed by env). imagePullSecrets are appended to every pod spec and Image.
 */
export function applyRegistry(registry: Registry | undefined): Transformer {
  const override = registry?.override ?? {};
  const defaultImage = registry?.default ?? "";
  const pullSecrets = registry?.imagePullSecrets ?? [];
  if (Object.keys(override).length === 0 && defaultImage === "" && pullSecrets.length === 0) return unchanged;

  // Appended, not merged, as upstream does: the release ships none.
  const appendPullSecrets = <T>(current: T[] | undefined) => [
    ...(current ?? []),
    ...structuredClone(pullSecrets),
  ];
  const fromDefault = (currentImage: string | undefined, fallbackName: string) =>
    defaultImage.replaceAll(NAME_VARIABLE, imageName(currentImage ?? "") || fallbackName);

  return (manifests) =>
    updateWhere(
      manifests,
      (manifest) => podTemplateOf(manifest) !== undefined || isCachingImage(manifest),
      (manifest) => {
        const template = podTemplateOf(manifest);
        if (!template) {
          const spec = manifest.spec as { image?: string; imagePullSecrets?: unknown[] };
          const image = lookup(override, manifest.metadata.name ?? "");
          if (image !== undefined) spec.image = image;
          else if (defaultImage !== "") spec.image = fromDefault(spec.image, manifest.metadata.name ?? "");
          if (pullSecrets.length > 0) spec.imagePullSecrets = appendPullSecrets(spec.imagePullSecrets);
          return;
        }
        // An object created by generateName only is keyed by that prefix, as upstream does.
        const workload = manifest.metadata.name || manifest.metadata.generateName || "";
        for (const container of template.spec.containers) {
          const image = lookup(override, `${workload}/${container.name}`) ?? lookup(override, container.name);
          if (image !== undefined) container.image = image;
          else if (defaultImage !== "") container.image = fromDefault(container.image, container.name);
          for (const envVar of container.env ?? []) {
            const envImage = lookup(override, envVar.name);
            if (envImage !== undefined) envVar.value = envImage;
          }
        }
        if (pullSecrets.length > 0)
          template.spec.imagePullSecrets = appendPullSecrets(template.spec.imagePullSecrets);
      },
    );
}

/**
 * The image's name for ${NAME}: the last path segment without tag or digest
 * (`gcr.io/knative-releases/knative.dev/serving/cmd/queue@sha256:…` -> `queue`); empty for a reference
 * without a path, whose container name is used instead (upstream's getImageName).
 */
export function imageName(reference: string): string {
  if (!reference.includes("/")) return "";
  const lastSegment = reference.slice(reference.lastIndexOf("/") + 1);
  return lastSegment.split("@")[0]!.split(":")[0]!;
}
