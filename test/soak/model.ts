import { stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import { ALLOW_UNKNOWN_SETTINGS_ANNOTATION } from "../../src/api/labels.ts";

// What the soak pushes to a fleet repository and what the fleet must then hold, as plain data: the files of
// one revision (each CR's version and a marker that names its content), the hub's ClusterProfiles as the
// soak changed them, and from both the CRs the hub must end up with. The driver applies random changes to
// this model and pushes the texts it renders; the checks compare what they observe with it.

/** The Knative minors knative-fleet ships; a version moves one minor at a time inside this window. */
export const KNATIVE_MINORS = ["1.20", "1.21", "1.22", "1.23"] as const;
/** ClusterProfile label the eventing placement selects on ("enabled"/"disabled"): a relabel flips it. */
export const EVENTING_LABEL = "soak.knative.dev/eventing";
/** ClusterProfile label naming a spoke's ring; the placement is widened or narrowed over rings. */
export const RING_LABEL = "soak.knative.dev/ring";
/** Key in each install's config-observability ConfigMap naming the content it was applied from. */
export const MARKER_KEY = "soak-marker";
/** The marker is no setting Knative knows: the settings check keeps it only when told to. */
const KEEP_MARKER = {
  [ALLOW_UNKNOWN_SETTINGS_ANNOTATION]: `spec.config.observability.${MARKER_KEY}`,
};
export const PLACEMENT_NAME = "eventing";
export const ROLLOUT_NAME = "soak";
const PLACEMENT_API_VERSION = "fleet.knative.dev/v1alpha1";

export interface FleetLayout {
  /** The hub namespace of the fleet's CRs (knative-fleet's defaultNamespace). */
  namespace: string;
  /** Where the fleet's ClusterProfiles live (its only allowed ClusterProfile namespace). */
  profileNamespace: string;
  /** ClusterProfile names, one per spoke. */
  spokes: readonly string[];
}

export interface CrContent {
  /** A minor of KNATIVE_MINORS. */
  version: string;
  /** Unique per fleet and content: what the spoke's config-observability says it was applied from. */
  marker: number;
}

export interface PlacementContent extends CrContent {
  /** The rings the placement selects (with EVENTING_LABEL=enabled); never empty. */
  rings: string[];
}

export interface RolloutContent {
  canary: string;
  maxUnavailable: number | string;
  soak: string;
}

/** One revision of a fleet repository, as the soak wrote it. */
export interface FleetFiles {
  /** Spoke -> its KnativeServing file; a broken file keeps the content it last held validly. */
  serving: ReadonlyMap<string, CrContent>;
  placement: PlacementContent | undefined;
  rollout: RolloutContent | undefined;
  /** Paths whose text is broken in this revision, and how. */
  broken: ReadonlyMap<string, Breakage>;
}

export type Breakage = "yaml-syntax" | "kind-typo" | "unknown-field";
export const BREAKAGES: readonly Breakage[] = ["yaml-syntax", "kind-typo", "unknown-field"];

export interface SpokeProfile {
  exists: boolean;
  eventing: boolean;
  ring: string;
  healthy: boolean;
}
export type Inventory = ReadonlyMap<string, SpokeProfile>;

export const servingPath = (spoke: string) => `clusters/serving-${spoke}.yaml`;
export const PLACEMENT_PATH = "clusters/eventing-placement.yaml";
export const ROLLOUT_PATH = "clusters/rollout.yaml";
export const ringOf = (layout: FleetLayout, spoke: string) => `r${(layout.spokes.indexOf(spoke) % 3) + 1}`;

/** A hub CR the fleet declares: `Kind namespace/name`, as the rollout state keys them. */
export interface ExpectedCr extends CrContent {
  kind: "KnativeServing" | "KnativeEventing";
  name: string;
  spoke: string;
}
export const crKey = (kind: string, namespace: string, name: string) => `${kind} ${namespace}/${name}`;

const servingSpec = (layout: FleetLayout, spoke: string, content: CrContent) => ({
  version: content.version,
  ingress: { kourier: { enabled: true, "service-type": "ClusterIP" } },
  config: {
    network: { "ingress-class": "kourier.ingress.networking.knative.dev" },
    observability: { [MARKER_KEY]: String(content.marker) },
  },
  clusterProfileRef: { namespace: layout.profileNamespace, name: spoke },
});

/** Every file of a revision, path -> text (a broken one in its broken form). */
export function renderFiles(layout: FleetLayout, files: FleetFiles): Map<string, string> {
  const texts = new Map<string, string>();
  for (const [spoke, content] of files.serving)
    texts.set(
      servingPath(spoke),
      stringify({
        apiVersion: OPERATOR_API_VERSION,
        kind: "KnativeServing",
        metadata: { name: `serving-${spoke}`, namespace: layout.namespace, annotations: KEEP_MARKER },
        spec: servingSpec(layout, spoke, content),
      }),
    );
  if (files.placement)
    texts.set(
      PLACEMENT_PATH,
      stringify({
        apiVersion: PLACEMENT_API_VERSION,
        kind: "KnativeEventingPlacement",
        metadata: { name: PLACEMENT_NAME, namespace: layout.namespace, annotations: KEEP_MARKER },
        spec: {
          clusterSelectorTerms: [
            {
              labelSelector: {
                matchLabels: { [EVENTING_LABEL]: "enabled" },
                matchExpressions: [{ key: RING_LABEL, operator: "In", values: files.placement.rings }],
              },
            },
          ],
          template: {
            spec: {
              version: files.placement.version,
              config: { observability: { [MARKER_KEY]: String(files.placement.marker) } },
            },
          },
        },
      }),
    );
  if (files.rollout)
    texts.set(
      ROLLOUT_PATH,
      stringify({
        apiVersion: PLACEMENT_API_VERSION,
        kind: "KnativeRollout",
        metadata: { name: ROLLOUT_NAME, namespace: layout.namespace },
        spec: {
          waves: [
            {
              name: "canary",
              clusterProfiles: [{ namespace: layout.profileNamespace, name: files.rollout.canary }],
            },
          ],
          maxUnavailable: files.rollout.maxUnavailable,
          soak: files.rollout.soak,
          // Far above any fault: a frozen spoke delays its wave, it does not halt the rollout.
          timeLimit: "30m",
        },
      }),
    );
  for (const [path, breakage] of files.broken) texts.set(path, breakText(texts.get(path) ?? "", breakage));
  return texts;
}

/** A file's text made invalid the ways people break files: a YAML syntax error, a kind typo, a typo'd field. */
export function breakText(text: string, breakage: Breakage): string {
  switch (breakage) {
    case "yaml-syntax":
      return `${text}  broken: [never closed\n`;
    case "kind-typo":
      return text.replace(/^kind: Knative(\w+)$/m, (_, rest: string) => `kind: Knative${rest.slice(0, -1)}`);
    case "unknown-field":
      return text.replace(/^spec:$/m, "spec:\n  verison: [1.22]");
  }
}

/** The changes that turn one revision's texts into the next's: path -> text, or null for a deleted file. */
export function changedTexts(
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
): Record<string, string | null> {
  const changes: Record<string, string | null> = {};
  for (const [path, text] of after) if (before.get(path) !== text) changes[path] = text;
  for (const path of before.keys()) if (!after.has(path)) changes[path] = null;
  return changes;
}

/** Whether the placement selects a spoke's ClusterProfile as it is now. */
export const placementSelects = (placement: PlacementContent, profile: SpokeProfile | undefined): boolean =>
  profile?.exists === true && profile.eventing && placement.rings.includes(profile.ring);

/**
 * The CRs the hub must hold for a revision and the ClusterProfiles as they are: one KnativeServing per
 * serving file (a broken one keeps its last valid content), one KnativeEventing per cluster the placement
 * selects. A broken placement or policy freezes what it declares: the caller keeps the earlier set then.
 */
export function expectedCrs(
  layout: FleetLayout,
  files: FleetFiles,
  inventory: Inventory,
): Map<string, ExpectedCr> {
  const crs = new Map<string, ExpectedCr>();
  for (const [spoke, content] of files.serving) {
    const name = `serving-${spoke}`;
    crs.set(crKey("KnativeServing", layout.namespace, name), {
      kind: "KnativeServing",
      name,
      spoke,
      ...content,
    });
  }
  if (files.placement)
    for (const spoke of layout.spokes) {
      if (!placementSelects(files.placement, inventory.get(spoke))) continue;
      const name = `${PLACEMENT_NAME}-${spoke}`;
      crs.set(crKey("KnativeEventing", layout.namespace, name), {
        kind: "KnativeEventing",
        name,
        spoke,
        version: files.placement.version,
        marker: files.placement.marker,
      });
    }
  return crs;
}

/**
 * The CR keys a sync may not prune: those the revision declares, and while a file is broken what it declared
 * before (a broken placement keeps its CRs; a broken policy holds every change, deletions included).
 */
export function protectedCrs(
  layout: FleetLayout,
  files: FleetFiles,
  inventory: Inventory,
  before: ReadonlySet<string>,
): Set<string> {
  const keys = new Set(expectedCrs(layout, files, inventory).keys());
  if (files.broken.has(ROLLOUT_PATH)) for (const key of before) keys.add(key);
  if (files.broken.has(PLACEMENT_PATH))
    for (const key of before) if (key.startsWith("KnativeEventing ")) keys.add(key);
  return keys;
}

/** The wave of a CR under a policy: the canary's spoke, or the implicit last wave. */
export const waveOf = (rollout: RolloutContent, spoke: string): string =>
  spoke === rollout.canary ? "canary" : "remaining";

/** A wave's maxUnavailable for its CR count: a count, or a percentage rounded down, at least 1. */
export function maxUnavailableOf(rollout: RolloutContent, waveCrs: number): number {
  const value = rollout.maxUnavailable;
  if (typeof value === "number") return value;
  return Math.max(1, Math.floor((Number.parseInt(value, 10) * waveCrs) / 100));
}

/** The next minor after `version` in `direction`, or undefined at the window's edge. */
export function nextMinor(version: string, direction: 1 | -1): string | undefined {
  const index = KNATIVE_MINORS.indexOf(version as (typeof KNATIVE_MINORS)[number]);
  return KNATIVE_MINORS[index + direction];
}

export interface Push {
  /** What a person would write as the commit subject. */
  message: string;
  /** The change's kind, for the report's tally. */
  kind: PushKind;
  files: FleetFiles;
}
export type PushKind =
  | "version"
  | "config"
  | "placement-widen"
  | "placement-narrow"
  | "file-removed"
  | "file-added"
  | "broken-file"
  | "fixed-file"
  | "rollout-policy";

export interface PushContext {
  rng: () => number;
  /** A fresh marker (a content never pushed before). */
  marker: () => number;
  /** Whether every CR of the kind is installed at the version its file names (a minor may move on). */
  versionSettled: (kind: ExpectedCr["kind"]) => boolean;
  /** Allow breaking a file (not in the last push before faults stop: the fleet must converge then). */
  mayBreak: boolean;
}

const pick = <T>(rng: () => number, items: readonly T[]): T => items[Math.floor(rng() * items.length)]!;

/**
 * One random change of a revision, as people make them: a version one minor up or down (once the last one
 * is installed everywhere), a config change, the placement widened or narrowed, a file removed or added
 * back, a file broken (and, the next time, fixed), the rollout policy added, changed or removed.
 */
export function nextPush(layout: FleetLayout, files: FleetFiles, context: PushContext): Push {
  const { rng, marker } = context;
  const serving = new Map(files.serving);
  const broken = new Map(files.broken);
  const next = (kind: PushKind, message: string, change: Partial<FleetFiles> = {}): Push => ({
    kind,
    message,
    files: { serving, placement: files.placement, rollout: files.rollout, broken, ...change },
  });
  if (broken.size > 0) {
    const [path] = broken.keys();
    broken.delete(path!);
    return next("fixed-file", `fix ${path}`);
  }
  const removed = layout.spokes.filter((s) => !serving.has(s));
  const rings = [...new Set(layout.spokes.map((s) => ringOf(layout, s)))];
  const placement = files.placement;
  const versionTarget = rng() < 0.5 || !placement ? "KnativeServing" : "KnativeEventing";
  const choices: [PushKind, number][] = [
    ["config", 35],
    ["version", context.versionSettled(versionTarget) ? 20 : 0],
    ["placement-widen", placement && placement.rings.length < rings.length ? 6 : 0],
    ["placement-narrow", placement && placement.rings.length > 1 ? 6 : 0],
    // At most one serving file away at a time, and never the last one: an empty fleet prunes nothing.
    [removed.length > 0 ? "file-added" : serving.size > 1 ? "file-removed" : "config", 10],
    ["broken-file", context.mayBreak ? 8 : 0],
    ["rollout-policy", 12],
  ];
  let roll = rng() * choices.reduce((sum, [, weight]) => sum + weight, 0);
  let kind: PushKind = "config";
  for (const [choice, weight] of choices) {
    if (roll < weight) {
      kind = choice;
      break;
    }
    roll -= weight;
  }
  const servingVersion = [...serving.values()][0]?.version ?? "1.22";
  switch (kind) {
    case "version": {
      const from = versionTarget === "KnativeServing" ? servingVersion : placement!.version;
      const to = nextMinor(from, rng() < 0.5 ? 1 : -1) ?? nextMinor(from, 1) ?? nextMinor(from, -1)!;
      if (versionTarget === "KnativeServing") {
        for (const spoke of serving.keys()) serving.set(spoke, { version: to, marker: marker() });
        return next(kind, `Serving ${from} -> ${to} on every spoke`);
      }
      return next(kind, `Eventing ${from} -> ${to} in the placement`, {
        placement: { ...placement!, version: to, marker: marker() },
      });
    }
    case "placement-widen":
    case "placement-narrow": {
      const current = placement!.rings;
      const widen = kind === "placement-widen";
      const ring = pick(rng, widen ? rings.filter((r) => !current.includes(r)) : current);
      return next(kind, `Eventing placement ${widen ? "widened to" : "narrowed from"} ring ${ring}`, {
        placement: {
          ...placement!,
          rings: widen ? [...current, ring].sort() : current.filter((r) => r !== ring),
        },
      });
    }
    case "file-removed": {
      const spoke = pick(rng, [...serving.keys()]);
      serving.delete(spoke);
      return next(kind, `remove Serving from ${spoke}`);
    }
    case "file-added": {
      const spoke = pick(rng, removed);
      serving.set(spoke, { version: servingVersion, marker: marker() });
      return next(kind, `add Serving back to ${spoke}`);
    }
    case "broken-file": {
      const paths = [
        ...[...serving.keys()].map(servingPath),
        ...(placement ? [PLACEMENT_PATH] : []),
        ...(files.rollout ? [ROLLOUT_PATH] : []),
      ];
      const path = pick(rng, paths);
      const breakage = pick(rng, BREAKAGES);
      broken.set(path, breakage);
      return next(kind, `edit ${path} (${breakage})`);
    }
    case "rollout-policy": {
      if (files.rollout && rng() < 0.3)
        return next(kind, "remove the rollout policy", { rollout: undefined });
      const rollout: RolloutContent = {
        canary: pick(rng, layout.spokes),
        maxUnavailable: rng() < 0.5 ? 1 : "50%",
        soak: `${3 + Math.floor(rng() * 6)}s`,
      };
      const same = JSON.stringify(rollout) === JSON.stringify(files.rollout);
      if (!same)
        return next(
          kind,
          `${files.rollout ? "change" : "add"} the rollout policy: canary ${rollout.canary}, maxUnavailable ${rollout.maxUnavailable}, soak ${rollout.soak}`,
          { rollout },
        );
      break;
    }
  }
  const targets = [...serving.keys(), ...(placement ? [PLACEMENT_PATH] : [])];
  const target = pick(rng, targets);
  if (target === PLACEMENT_PATH)
    return next("config", "Eventing: observability config changed in the placement", {
      placement: { ...placement!, marker: marker() },
    });
  serving.set(target, { ...serving.get(target)!, marker: marker() });
  return next("config", `Serving on ${target}: observability config changed`);
}

/**
 * The warm-up before the measured part of a long run: the placement widened to every ring, then Serving
 * and then Eventing walked one minor at a time up to the newest of the window and down to the oldest. So
 * every replica has met every release it parses once and keeps (src/render/release.ts) before the
 * resource slopes start, and a slope is what grows, not a bounded cache filling up as the pushes happen to
 * reach a version for the first time.
 */
export function warmUpPushes(layout: FleetLayout, files: FleetFiles, marker: () => number): Push[] {
  const pushes: Push[] = [];
  let current = files;
  const add = (kind: PushKind, message: string, change: Partial<FleetFiles>) => {
    current = { ...current, ...change };
    pushes.push({ kind, message: `${message} (warm-up)`, files: current });
  };
  const rings = [...new Set(layout.spokes.map((s) => ringOf(layout, s)))].sort();
  if (current.placement && current.placement.rings.length < rings.length)
    add("placement-widen", "Eventing placement widened to every ring", {
      placement: { ...current.placement, rings },
    });
  for (const kind of ["KnativeServing", "KnativeEventing"] as const)
    for (const direction of [1, -1] as const)
      for (;;) {
        const from =
          kind === "KnativeServing" ? [...current.serving.values()][0]?.version : current.placement?.version;
        const to = from === undefined ? undefined : nextMinor(from, direction);
        if (to === undefined) break;
        if (kind === "KnativeServing")
          add("version", `Serving ${from} -> ${to} on every spoke`, {
            serving: new Map([...current.serving.keys()].map((s) => [s, { version: to, marker: marker() }])),
          });
        else
          add("version", `Eventing ${from} -> ${to} in the placement`, {
            placement: { ...current.placement!, version: to, marker: marker() },
          });
      }
  return pushes;
}
