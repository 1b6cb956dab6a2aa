import { VERSION_VARIABLE } from "../admission/locations.ts";
import { EVENT_SOURCES, type KnativeResource, type KnativeServingSpec } from "../api/knative.ts";
import type { ByteBudget } from "./location-loader.ts";
import type { Manifest } from "./manifest.ts";
import { type AddOn, type Component, INGRESSES, type IngressName, type ManifestSource } from "./source.ts";
import { isKnativeVersion, minorOf, resolveVersion, VersionError } from "./version.ts";

/** Everything a CR installs before it is transformed: what render() takes. */
export interface Release {
  component: Component;
  /** The resolved target version: what status.version becomes once installed. */
  version: string;
  /** The Serving ingresses whose manifests are included (none for Eventing). */
  ingresses: readonly IngressName[];
  /** The enabled event sources (Eventing) or Security-Guard (Serving) whose manifests are included. */
  addOns: readonly AddOn[];
  /**
   * In upstream order: the release (or spec.manifests), the selected ingresses, the enabled event sources or
   * Security-Guard, spec.additionalManifests.
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
 * Security-Guard's release for each Serving minor, as upstream maps them
 * (pkg/reconciler/knativeserving/security/securityguard.go `SecurityGuardVersion`).
 */
export const SECURITY_GUARD_VERSIONS: Readonly<Record<string, string>> = {
  "1.20": "0.6",
  "1.21": "0.6",
  "1.22": "0.6",
  "1.23": "0.6",
};

/**
 * What a CR installs beside its release: the event sources its spec.source enables, in upstream's order
 * (knativeeventing/source: ceph, github, gitlab, kafka, rabbitmq, redis), or Security-Guard when
 * spec.security.securityGuard is enabled; each from the kodata of the target minor. Undefined: Serving
 * asks for Security-Guard at a minor upstream has no release of it for.
 */
export function selectedAddOns(resource: KnativeResource, version: string): AddOn[] | undefined {
  const minor = minorOf(version);
  if (resource.kind === "KnativeEventing") {
    const source = resource.spec.source;
    return EVENT_SOURCES.filter((name) => source?.[name]?.enabled === true).map((name) => ({
      kind: "eventing-source" as const,
      source: name,
      minor,
    }));
  }
  if (resource.spec.security?.securityGuard?.enabled !== true) return [];
  const guard = SECURITY_GUARD_VERSIONS[minor];
  return guard === undefined ? undefined : [{ kind: "security-guard", version: guard }];
}

const describeAddOn = (addOn: AddOn): string =>
  addOn.kind === "eventing-source"
    ? `the ${addOn.source} event source for ${DISPLAY_NAME["knative-eventing"]} ${addOn.minor}`
    : `Security-Guard ${addOn.version}`;

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

    const custom = customLocations.length > 0;
    const addOns = selectedAddOns(resource, version);
    // With spec.manifests the CR may bring Security-Guard itself: upstream then tolerates a minor without one.
    if (addOns === undefined && !custom) {
      throw new VersionError(
        `Security-Guard has no release for ${DISPLAY_NAME["knative-serving"]} ${minorOf(version)} ` +
          `(it has for ${Object.keys(SECURITY_GUARD_VERSIONS).join(", ")})`,
      );
    }
    const [base, ingressManifests, addOnManifests, additional] = await Promise.all([
      custom
        ? this.#locations(customLocations.map(atVersion), budget)
        : this.#cached(`${component}@${version}`, () => this.#source.componentManifests(component, version)),
      Promise.all(ingresses.map((ingress) => this.#ingress(ingress, version, custom))),
      Promise.all((addOns ?? []).map((addOn) => this.#addOn(addOn, custom))),
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
      ...(addOns ?? []).flatMap((addOn, i) =>
        (addOnManifests[i] ?? []).length > 0 ? [this.#source.addOnLocation(addOn)] : [],
      ),
      ...additionalLocations.map(atVersion),
    ];
    return {
      component,
      version,
      ingresses,
      addOns: addOns ?? [],
      manifests: [...base, ...ingressManifests.flat(), ...addOnManifests.flat(), ...additional],
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

  async #addOn(addOn: AddOn, custom: boolean): Promise<readonly Manifest[]> {
    const key =
      addOn.kind === "eventing-source" ? `source/${addOn.source}@${addOn.minor}` : `guard@${addOn.version}`;
    const manifests = await this.#cached(key, () => this.#source.addOnManifests(addOn));
    if (manifests) return manifests;
    if (custom) return [];
    throw new VersionError(`no manifests for ${describeAddOn(addOn)} in the release manifests`);
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
