import { join } from "node:path";
import { EVENT_SOURCES } from "../api/knative.ts";
import { readCompiled, writeCompiled } from "./compiled.ts";
import { isMissingFile, readManifestFiles, subdirectories } from "./files.ts";
import { type ByteBudget, LocationLoader, type LocationLoaderOptions } from "./location-loader.ts";
import { type Manifest, parseManifestFiles } from "./manifest.ts";
import { isReleaseVersion, newestFirst } from "./version.ts";

export const COMPONENTS = ["knative-serving", "knative-eventing"] as const;
/** A component directory of the kodata layout, named like the namespace it installs into by default. */
export type Component = (typeof COMPONENTS)[number];

/** In the order upstream loads them when several are enabled. */
export const INGRESSES = ["istio", "contour", "kourier", "gateway-api"] as const;
export type IngressName = (typeof INGRESSES)[number];
type EventSourceName = (typeof EVENT_SOURCES)[number];

/**
 * What a CR installs beside its release from the kodata, as upstream keeps it: an event source of an
 * Eventing minor (`eventing-source/<minor>/<source>/`), or a Security-Guard release
 * (`security-guard/<major.minor>/`).
 */
export type AddOn =
  | { kind: "eventing-source"; source: EventSourceName; minor: string }
  | { kind: "security-guard"; version: string };

/** The folder of an add-on, relative to the kodata root. */
function addOnFolder(addOn: AddOn): string {
  return addOn.kind === "eventing-source"
    ? join("eventing-source", addOn.minor, addOn.source)
    : join("security-guard", addOn.version);
}

/**
 * Where release manifests come from. The engine injects one; manifests returned are deeply frozen and may be
 * shared between calls.
 */
export interface ManifestSource {
  /** The release versions shipped for `component`. */
  componentVersions(component: Component): Promise<readonly string[]>;
  /** A release's manifests, files in file-name order. */
  componentManifests(component: Component, version: string): Promise<readonly Manifest[]>;
  /** The manifests of one ingress for a Serving minor (`1.22`); undefined when the source has none. */
  ingressManifests(ingress: IngressName, minor: string): Promise<readonly Manifest[] | undefined>;
  /** The manifests of an event source or of Security-Guard; undefined when the source has none. */
  addOnManifests(addOn: AddOn): Promise<readonly Manifest[] | undefined>;
  /**
   * The manifests behind a spec.manifests / spec.additionalManifests entry (URL or path, ${VERSION} resolved),
   * if the location policy allows it; `budget` is one CR's byte allowance, shared by its locations.
   */
  locationManifests(location: string, budget: ByteBudget): Promise<readonly Manifest[]>;
  /** A fresh byte allowance for one CR's locations. */
  locationBudget(): ByteBudget;
  /**
   * Where a release and an ingress are read from, as status.manifests records them: the upstream operator
   * writes the kodata directories it read (`$KO_DATA_PATH/knative-serving/1.22.1`) and reads them back at
   * the next upgrade to find obsolete objects, so the same text lets either project take over.
   */
  componentLocation(component: Component, version: string): string;
  ingressLocation(ingress: IngressName, minor: string): string;
  addOnLocation(addOn: AddOn): string;
}

interface KodataSourceOptions extends LocationLoaderOptions {
  /** The root of the upstream operator's kodata layout: `<component>/<version>/`, `ingress/<minor>/<name>/`. */
  dir: string;
}

/** A ManifestSource over a directory in the upstream kodata layout, plus URL and path locations. */
export function createKodataSource(options: KodataSourceOptions): ManifestSource {
  const { dir } = options;
  const locations = new LocationLoader({ kodataDir: dir, ...options });
  const readDirectory = async (path: string) => {
    const files = await readManifestFiles(path);
    return (await readCompiled(dir, files)) ?? parseManifestFiles(files);
  };
  const readOptional = async (path: string) => {
    try {
      return await readDirectory(path);
    } catch (error) {
      if (isMissingFile(error)) return undefined;
      throw error;
    }
  };
  return {
    async componentVersions(component) {
      const versions = (await subdirectories(join(dir, component))).filter(isReleaseVersion);
      return versions.sort(newestFirst);
    },
    componentManifests: (component, version) => readDirectory(join(dir, component, version)),
    ingressManifests: (ingress, minor) => readOptional(join(dir, "ingress", minor, ingress)),
    addOnManifests: (addOn) => readOptional(join(dir, addOnFolder(addOn))),
    locationManifests: (location, budget) => locations.load(location, budget),
    locationBudget: () => locations.budget(),
    componentLocation: (component, version) => join(dir, component, version),
    ingressLocation: (ingress, minor) => join(dir, "ingress", minor, ingress),
    addOnLocation: (addOn) => join(dir, addOnFolder(addOn)),
  };
}

/**
 * Compiles every release folder of a kodata directory (see compiled.ts); yields each folder with the size of
 * its compiled copy (undefined: not compiled, see writeCompiled).
 */
export async function* compileKodata(
  dir: string,
): AsyncGenerator<{ folder: string; bytes: number | undefined }> {
  for (const folder of await releaseFolders(dir)) {
    yield { folder, bytes: await writeCompiled(dir, await readManifestFiles(folder)) };
  }
}

/**
 * The release folders of a kodata directory: each component version, each ingress and event source of each
 * minor, and each Security-Guard release.
 */
async function releaseFolders(dir: string): Promise<string[]> {
  const folders: string[] = [];
  for (const component of COMPONENTS)
    for (const version of await subdirectories(join(dir, component)))
      if (isReleaseVersion(version)) folders.push(join(dir, component, version));
  for (const minor of await subdirectories(join(dir, "ingress")))
    for (const ingress of await subdirectories(join(dir, "ingress", minor)))
      if ((INGRESSES as readonly string[]).includes(ingress))
        folders.push(join(dir, "ingress", minor, ingress));
  for (const minor of await subdirectories(join(dir, "eventing-source")))
    for (const source of await subdirectories(join(dir, "eventing-source", minor)))
      if ((EVENT_SOURCES as readonly string[]).includes(source))
        folders.push(join(dir, "eventing-source", minor, source));
  for (const version of await subdirectories(join(dir, "security-guard")))
    folders.push(join(dir, "security-guard", version));
  return folders;
}
