import { VERSION_VARIABLE } from "../admission/locations.ts";
import type { KnativeResource, KnativeServingSpec } from "../api/knative.ts";
import type { ByteBudget } from "./location-loader.ts";
import type { Manifest } from "./manifest.ts";
import { type Component, INGRESSES, type IngressName, type ManifestSource } from "./source.ts";
import { isKnativeVersion, minorOf, resolveVersion, VersionError } from "./version.ts";

/** Everything a CR installs before it is transformed: what render() takes. */
export interface Release {
  component: Component;
  /** The resolved target version: what status.version becomes once installed. */
  version: string;
  /** The Serving ingresses whose manifests are included (none for Eventing). */
  ingresses: readonly IngressName[];
  /**
   * In upstream order: the release (or spec.manifests), the selected ingresses, spec.additionalManifests.
   * Deeply frozen and shared with the loader's cache.
   */
  manifests: readonly Manifest[];
  /**
   * status.manifests, as upstream writes it: where the release came from (its kodata directory, or
   * spec.manifests with ${VERSION} resolved), then the ingresses' directories, then spec.additionalManifests.
   */
  locations: readonly string[];
}

export const COMPONENT_OF_KIND = {
  KnativeServing: "knative-serving",
  KnativeEventing: "knative-eventing",
} as const satisfies Record<KnativeResource["kind"], Component>;

const DISPLAY_NAME: Record<Component, string> = {
  "knative-serving": "Knative Serving",
  "knative-eventing": "Knative Eventing",
};

/**
 * The ingresses a KnativeServing installs: the enabled ones in upstream's order, Istio when none is enabled
 * (upstream's default, as when spec.ingress is absent).
 */
export function selectedIngresses(spec: KnativeServingSpec): IngressName[] {
  const enabled = INGRESSES.filter((ingress) => spec.ingress?.[ingress]?.enabled === true);
  return enabled.length > 0 ? enabled : ["istio"];
}

/**
 * Resolves a CR's target version and gathers its manifests from a ManifestSource. Release and ingress
 * manifests are parsed once per (component, version) and (ingress, minor) and then served from memory, since
 * every reconcile of every cluster asks for them; URL locations are cached by the source.
 */
export class ReleaseLoader {
  readonly #source: ManifestSource;
  readonly #parsed = new Map<string, Promise<readonly Manifest[] | undefined>>();

  constructor(source: ManifestSource) {
    this.#source = source;
  }

  /** The versions the source ships for a component, newest first. */
  availableVersions(component: Component): Promise<readonly string[]> {
    return this.#source.componentVersions(component);
  }

  async load(resource: KnativeResource): Promise<Release> {
    const component = COMPONENT_OF_KIND[resource.kind];
    const { spec } = resource;
    const customLocations = (spec.manifests ?? []).map((manifest) => manifest.URL);
    const additionalLocations = (spec.additionalManifests ?? []).map((manifest) => manifest.URL);
    const version = await this.#targetVersion(component, spec.version, customLocations.length > 0);
    const ingresses = resource.kind === "KnativeServing" ? selectedIngresses(resource.spec) : [];
    const atVersion = (location: string) => location.replaceAll(VERSION_VARIABLE, version);
    const budget = this.#source.locationBudget();

    const [base, ingressManifests, additional] = await Promise.all([
      customLocations.length > 0
        ? this.#locations(customLocations.map(atVersion), budget)
        : this.#cached(`${component}@${version}`, () => this.#source.componentManifests(component, version)),
      Promise.all(ingresses.map((ingress) => this.#ingress(ingress, version, customLocations.length > 0))),
      this.#locations(additionalLocations.map(atVersion), budget),
    ]);
    const minor = minorOf(version);
    const locations = [
      ...(customLocations.length > 0
        ? customLocations.map(atVersion)
        : [this.#source.componentLocation(component, version)]),
      ...ingresses.flatMap((ingress, i) =>
        (ingressManifests[i] ?? []).length > 0 ? [this.#source.ingressLocation(ingress, minor)] : [],
      ),
      ...additionalLocations.map(atVersion),
    ];
    return {
      component,
      version,
      ingresses,
      manifests: [...base, ...ingressManifests.flat(), ...additional],
      locations,
    };
  }

  async #targetVersion(
    component: Component,
    requested: string | undefined,
    custom: boolean,
  ): Promise<string> {
    // With spec.manifests the manifests define the release: upstream takes spec.version as given.
    if (custom) {
      if (!requested || !isKnativeVersion(requested)) {
        throw new VersionError("spec.manifests needs spec.version: the version of the release they hold");
      }
      return requested;
    }
    const available = await this.#source.componentVersions(component);
    return resolveVersion(requested, available, DISPLAY_NAME[component]);
  }

  async #ingress(ingress: IngressName, version: string, custom: boolean): Promise<readonly Manifest[]> {
    const minor = minorOf(version);
    const manifests = await this.#cached(`ingress/${ingress}@${minor}`, () =>
      this.#source.ingressManifests(ingress, minor),
    );
    if (manifests) return manifests;
    // spec.manifests may carry the ingress itself; upstream then tolerates a missing bundled one.
    if (custom) return [];
    throw new VersionError(`no ${ingress} ingress manifests for ${DISPLAY_NAME["knative-serving"]} ${minor}`);
  }

  async #locations(locations: readonly string[], budget: ByteBudget): Promise<Manifest[]> {
    const loaded = await Promise.all(
      locations.map((location) => this.#source.locationManifests(location, budget)),
    );
    return loaded.flat();
  }

  #cached<T extends readonly Manifest[] | undefined>(key: string, read: () => Promise<T>): Promise<T> {
    let parsed = this.#parsed.get(key) as Promise<T> | undefined;
    if (!parsed) {
      parsed = read();
      this.#parsed.set(key, parsed);
      // A failed read (a file being replaced, say) must not stick.
      parsed.catch(() => this.#parsed.delete(key));
    }
    return parsed;
  }
}
