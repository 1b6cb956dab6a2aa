import { readinessOf } from "../api/conditions.ts";
import type { KnativeStatus } from "../api/knative.ts";
import { UPGRADE_TARGET_ANNOTATION } from "../api/labels.ts";
import { compareStrings } from "../fleet/diagnostic.ts";
import { clusterLabel, formatIdentity, identityOf, targetOf } from "../fleet/identity.ts";
import type { DesiredResource } from "../fleet/model.ts";
import type { KubeObject } from "../kube/object.ts";
import { parseVersion } from "../render/version.ts";

// Upgrade chains, pure: a CR whose file wants a version several minors ahead of what its hub CR has becomes
// one-minor steps (Knative, like its operator, refuses to skip a minor: VersionMigrationEligible). The CRs of
// one kind that want the same minor form a chain, and the chain has one step under way: a CR behind it
// gets the next minor, a CR at or past it keeps its version. With a rollout policy the step advances once
// the rollout that carried it completed (every wave, canary first, soaked); the step is kept in the rollout
// state. Without one it advances once every CR of the chain is Ready on the version it has.
//
// Guarantees (checked by test/unit/rollout/model.test.ts over random interleavings):
//   1. a CR's hub spec.version moves by at most one minor per write (the step is its own version or one up);
//   2. with a policy, the step never moves while a rollout is under way or halted, so no step opens on any
//      cluster before the previous one completed on every cluster that could take it;
//   3. a stepped hub CR says what its file wants (UPGRADE_TARGET_ANNOTATION), and `stepTo` rewrites a
//      file's CR to a step the same way every time, so a revert re-derives exactly the content it left.

/** What is known of the chains before this sync: the step each one has under way, and whether it is done. */
interface UpgradeMemory {
  /**
   * The releases there are, per kind (newest first): a chain is made only when every minor on its way has
   * one; otherwise the CR is left as its file says, and its version is refused where it is today.
   */
  available?: Readonly<Partial<Record<string, readonly string[]>>>;
  /** A rollout policy gates the fleet: its state keeps each chain's step. */
  gated: boolean;
  /** The steps under way, by chain, as the rollout state stored them. */
  steps?: Readonly<Record<string, string>>;
  /** The stored rollout is complete (or there is none): the step under way went through every wave. */
  atRest: boolean;
  /**
   * The version each CR settled on, by `Kind namespace/name`: its baseline's (the content of the last
   * rollout that completed with it healthy). A CR moves at most one minor past it per rollout.
   */
  settled?: Readonly<Record<string, string>>;
}

/**
 * The memory of a sync: with a rollout policy (`gated`), the steps its stored state keeps and whether its
 * last rollout completed; without one, the hub CRs alone.
 */
export function upgradeMemory(
  gated: boolean,
  state:
    | {
        phase: string;
        upgrades?: Readonly<Record<string, string>>;
        crs: Readonly<Record<string, { baseline?: { version?: string } }>>;
      }
    | undefined,
): UpgradeMemory {
  if (!gated) return { gated, atRest: true };
  const settled = Object.entries(state?.crs ?? {}).flatMap(([key, cr]) =>
    cr.baseline?.version === undefined ? [] : [[key, cr.baseline.version] as const],
  );
  return {
    gated,
    ...(state?.upgrades && { steps: state.upgrades }),
    atRest: state === undefined || state.phase === "Complete",
    settled: Object.fromEntries(settled),
  };
}

/** One CR on its way through a chain, for plan, the status file and the metrics. */
export interface ChainedCr {
  /** `Kind namespace/name`. */
  key: string;
  path: string;
  cluster: string;
  chain: string;
  /** The minor its hub CR has, the version it is given this sync and the version its file wants. */
  from: string;
  step: string;
  target: string;
  /** Every minor from `from` to the target's, in order. */
  minors: string[];
}

export interface UpgradeChains {
  resources: DesiredResource[];
  /** The step under way per chain, to store; a chain whose CRs all reached their target is gone. */
  steps: Record<string, string>;
  crs: ChainedCr[];
}

interface Minor {
  major: number;
  minor: number;
}

interface Link {
  index: number;
  desired: DesiredResource;
  live: KubeObject;
  chain: string;
  target: Minor;
  /** The minor the hub CR has, and its spec.version as written. */
  at: Minor;
  atVersion: string;
  /** The minor it settled on (its baseline's), or the one it has when that is not known. */
  level: number;
  /** It took a minor in the rollout under way: it takes no other before that rollout completes. */
  moved: boolean;
}

const minorText = (version: Minor): string => `${version.major}.${version.minor}`;

function minorOf(version: unknown): Minor | undefined {
  if (typeof version !== "string") return undefined;
  const parsed = parseVersion(version.trim());
  return parsed && { major: parsed.major, minor: parsed.minor };
}

/** The file's CR with `version` as its spec.version, saying which version its file wants. */
export function stepTo(desired: DesiredResource, version: string): DesiredResource {
  const { resource } = desired;
  const wanted = String(resource.spec.version ?? "");
  return {
    ...desired,
    resource: {
      ...resource,
      metadata: {
        ...resource.metadata,
        annotations: { ...resource.metadata.annotations, [UPGRADE_TARGET_ANNOTATION]: wanted },
      },
      spec: { ...resource.spec, version },
    } as DesiredResource["resource"],
  };
}

/**
 * A file's CR as a hub CR with `version` had it: the file's own when it says that version (or none is
 * known), else the step `stepTo` wrote. What a revert re-derives from a baseline's commit and version.
 */
export function atVersion(desired: DesiredResource, version: string | undefined): DesiredResource {
  return version === undefined || version === String(desired.resource.spec.version ?? "")
    ? desired
    : stepTo(desired, version);
}

/** The version a stepped hub CR was given, when it is a step (what a baseline records for its revert). */
export function stepOf(live: KubeObject): string | undefined {
  if (live.metadata.annotations?.[UPGRADE_TARGET_ANNOTATION] === undefined) return undefined;
  const version = (live.spec as { version?: unknown } | undefined)?.version;
  return typeof version === "string" ? version : undefined;
}

/** A hub CR's spec.version when it names a release (`x.y` or `x.y.z`): what a baseline records. */
export function versionOf(live: KubeObject): string | undefined {
  const version = (live.spec as { version?: unknown } | undefined)?.version;
  return typeof version === "string" && minorOf(version) !== undefined ? version : undefined;
}

/** Every minor from `from` (excluded) to `to` has a release, as far as the releases are known. */
function releasedUpTo(from: Minor, to: Minor, available: readonly string[] | undefined): boolean {
  if (available === undefined) return true;
  const minors = new Set(
    available.flatMap((version) => {
      const minor = minorOf(version);
      return minor && minor.major === to.major ? [minor.minor] : [];
    }),
  );
  for (let minor = from.minor + 1; minor <= to.minor; minor++) if (!minors.has(minor)) return false;
  return true;
}

/**
 * The hub CR's minor: its spec.version, or the installed one (status.version) when that says `latest`. A CR
 * with its own manifests (spec.manifests) brings one release: it is no chain.
 */
function linkOf(
  index: number,
  desired: DesiredResource,
  live: KubeObject | undefined,
  memory: UpgradeMemory,
): Link | undefined {
  const { spec, kind } = desired.resource;
  const target = minorOf(spec.version);
  if (live === undefined || target === undefined || (spec.manifests ?? []).length > 0) return undefined;
  const specVersion = (live.spec as { version?: unknown } | undefined)?.version;
  const at = minorOf(specVersion) ?? minorOf((live.status as KnativeStatus | undefined)?.version);
  // Another major, or a downgrade: not a chain (the hub controller refuses what it must).
  if (at === undefined || at.major !== target.major || at.minor > target.minor) return undefined;
  if (!releasedUpTo(at, target, memory.available?.[kind])) return undefined;
  const { namespace, name } = desired.resource.metadata;
  const settled = minorOf(memory.settled?.[formatIdentity({ kind, namespace, name })]);
  const level = settled?.major === at.major ? settled.minor : undefined;
  return {
    index,
    desired,
    live,
    chain: `${desired.resource.kind} ${minorText(target)}`,
    target,
    at,
    atVersion: typeof specVersion === "string" && minorOf(specVersion) ? specVersion : minorText(at),
    level: level ?? at.minor,
    // Without a baseline it moves with the chain's step, which moves only between rollouts.
    moved: memory.gated && level !== undefined && at.minor !== level,
  };
}

/** Ready on the version its hub CR asks for, as the hub controller reports it. */
function settled(link: Link): boolean {
  const status = link.live.status as KnativeStatus | undefined;
  const installed = minorOf(status?.version);
  return (
    installed?.minor === link.at.minor &&
    readinessOf({ metadata: link.live.metadata, status }).phase === "Current"
  );
}

/** The minor a chain's CRs are taken to this sync, from what they have and what the memory says. */
function stepOfChain(links: readonly Link[], memory: UpgradeMemory): number | undefined {
  const target = links[0]!.target.minor;
  const lowest = Math.min(...links.map((link) => link.level));
  const stored = minorOf(memory.steps?.[links[0]!.chain]);
  const under = stored && stored.minor >= lowest && stored.minor <= target ? stored.minor : undefined;
  // One minor from a version the file gave: no chain. One left after steps: the chain's last step.
  const stepping = links.some((link) => stepOf(link.live) !== undefined);
  // (A CR below the minor it settled on, moved down in the rollout under way, counts by the one it has.)
  const lowestHad = Math.min(lowest, ...links.map((link) => link.at.minor));
  if (under === undefined && !stepping && lowestHad >= target - 1) return undefined;
  if (!memory.gated) return links.every(settled) ? Math.min(lowest + 1, target) : lowest;
  if (under === undefined) return lowest + 1;
  return memory.atRest ? Math.min(under + 1, target) : under;
}

/**
 * Each file's CR that is several minors ahead of its hub CR, given the next step of its chain instead; the
 * steps under way to store. A CR not yet on the hub installs its file's version (nothing to step from).
 */
export function chainUpgrades(
  resources: readonly DesiredResource[],
  live: readonly KubeObject[],
  memory: UpgradeMemory,
): UpgradeChains {
  const liveByKey = new Map(live.map((object) => [formatIdentity(identityOf(object)), object]));
  const chains = new Map<string, Link[]>();
  resources.forEach((desired, index) => {
    const { kind, metadata } = desired.resource;
    const key = formatIdentity({ kind, namespace: metadata.namespace, name: metadata.name });
    const link = linkOf(index, desired, liveByKey.get(key), memory);
    if (link) chains.set(link.chain, [...(chains.get(link.chain) ?? []), link]);
  });
  const stepped = [...resources];
  const steps: Record<string, string> = {};
  const crs: ChainedCr[] = [];
  for (const [chain, links] of [...chains].sort(([a], [b]) => compareStrings(a, b))) {
    const step = stepOfChain(links, memory);
    if (step === undefined) continue;
    const { major, minor: target } = links[0]!.target;
    if (memory.gated && links.some((link) => link.at.minor < target)) steps[chain] = `${major}.${step}`;
    for (const link of links.filter((link) => link.at.minor < target)) {
      const next = link.moved || link.at.minor >= step ? link.at.minor : link.at.minor + 1;
      if (next !== target) {
        stepped[link.index] = stepTo(
          link.desired,
          next === link.at.minor ? link.atVersion : `${major}.${next}`,
        );
      }
      const { kind, metadata } = link.desired.resource;
      crs.push({
        key: formatIdentity({ kind, namespace: metadata.namespace, name: metadata.name }),
        path: link.desired.path,
        cluster: clusterLabel(targetOf(link.live)),
        chain,
        from: minorText(link.at),
        step: `${major}.${next}`,
        target: String(link.desired.resource.spec.version),
        minors: Array.from({ length: target - link.at.minor + 1 }, (_, i) => `${major}.${link.at.minor + i}`),
      });
    }
  }
  crs.sort((a, b) => compareStrings(a.key, b.key));
  return { resources: stepped, steps, crs };
}
