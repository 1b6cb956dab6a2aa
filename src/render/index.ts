// The render stage: Knative release manifests in, the desired objects of one CR out.

export {
  checkKubernetesVersion,
  type KubernetesCompatibility,
  minimumKubernetesVersion,
} from "./kubernetes-version.ts";
export { ByteBudget } from "./location-loader.ts";
export type { Manifest, Transformer } from "./manifest.ts";
export { deepFreeze, ManifestParseError, parseManifests, RenderError } from "./manifest.ts";
export {
  COMPONENT_OF_KIND,
  type Release,
  ReleaseLoader,
  SECURITY_GUARD_VERSIONS,
  selectedAddOns,
  selectedIngresses,
} from "./release.ts";
export { render } from "./render.ts";
export {
  type AddOn,
  COMPONENTS,
  type Component,
  compileKodata,
  createKodataSource,
  INGRESSES,
  type IngressName,
  type ManifestSource,
} from "./source.ts";
export { checkVersionMigration, minorOf, newestFirst, resolveVersion, VersionError } from "./version.ts";
