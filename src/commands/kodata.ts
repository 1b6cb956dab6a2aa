import { stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { LocationPolicy } from "../admission/locations.ts";
import {
  ByteBudget,
  COMPONENTS,
  type Component,
  createKodataSource,
  INGRESSES,
  type ManifestSource,
  minimumKubernetesVersion,
  minorOf,
  newestFirst,
} from "../render/index.ts";
import { type ParsedArgs, UsageError } from "./command.ts";

/** The --kodata flag, as the commands that read releases take it. */
export const KODATA_OPTION = { kodata: { type: "string" } } as const;

/**
 * Where every command looks for the release manifests without --kodata, in order: the one default `--help`
 * and docs/cli.md give (test/unit/cli/docs-cli.test.ts). The image sets $KO_DATA_PATH to its bundled releases,
 * so the service in the image never reaches the cache.
 */
export const KODATA_DEFAULT = "$KO_DATA_PATH, else the fetched cache ~/.cache/knative-fleet/kodata";

/** The --kodata line of a command's help, in the columns of HUB_FLAGS_HELP. */
export const KODATA_FLAG_HELP = `  --kodata DIR                          Knative release manifests in the operator's kodata layout (default:
                                        ${KODATA_DEFAULT})`;

/** Where the CLI found the Knative release manifests, and which setting named them. */
export interface KodataLocation {
  dir: string;
  from: "--kodata" | "KO_DATA_PATH" | "cache";
}

/** The cache `fetch-kodata.sh` fills for CLI users: $XDG_CACHE_HOME/knative-fleet/kodata. */
function kodataCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "knative-fleet", "kodata");
}

/** The script that fetches the releases, shipped in the npm package and the repository (two levels up). */
const FETCH_SCRIPT = fileURLToPath(new URL("../../scripts/fetch-kodata.sh", import.meta.url));

const isDirectory = (path: string) =>
  stat(path).then(
    (stats) => stats.isDirectory(),
    () => false,
  );

/**
 * The release manifests, looked up in order: `--kodata`, `$KO_DATA_PATH` (the image sets it to the bundled
 * /opt/knative-fleet/kodata), then the fetched cache (KODATA_DEFAULT). A named directory that is missing is a
 * usage error; undefined when nothing names one and the cache is empty.
 */
export async function findKodata(
  flag: ParsedArgs["values"][string],
  env: NodeJS.ProcessEnv = process.env,
): Promise<KodataLocation | undefined> {
  if (flag !== undefined && typeof flag !== "string") throw new UsageError("--kodata needs a directory");
  for (const [dir, from] of [
    [flag, "--kodata"],
    [env.KO_DATA_PATH, "KO_DATA_PATH"],
  ] as const) {
    if (dir === undefined || dir === "") continue;
    if (!(await isDirectory(dir))) throw new UsageError(`${from} ${dir} is not a directory`);
    return { dir, from };
  }
  const cache = kodataCacheDir(env);
  return (await isDirectory(cache)) ? { dir: cache, from: "cache" } : undefined;
}

/** What to tell a user who has no release manifests yet. */
export function missingKodataMessage(env: NodeJS.ProcessEnv = process.env): string {
  const cache = kodataCacheDir(env);
  return (
    "no Knative release manifests: pass --kodata DIR (the operator's kodata layout: knative-serving/<version>/, " +
    "knative-eventing/<version>/, ingress/<minor>/<name>/), set KO_DATA_PATH (the image sets it), or fetch the " +
    `releases into ${cache} with: sh ${FETCH_SCRIPT} ${cache}`
  );
}

/** Raised by a source without release manifests when something has to be rendered. */
class MissingKodataError extends Error {
  override name = "MissingKodataError";
}

/**
 * A ManifestSource over the kodata found, or, when there is none, one that fails on first use with
 * missingKodataMessage: a plan that renders nothing then needs no release manifests.
 */
export function kodataSource(
  location: KodataLocation | undefined,
  policy: LocationPolicy,
): {
  source: ManifestSource;
  used(): boolean;
} {
  if (location !== undefined)
    return { source: createKodataSource({ dir: location.dir, policy }), used: () => false };
  let used = false;
  const missing = (): never => {
    used = true;
    throw new MissingKodataError(missingKodataMessage());
  };
  return {
    source: {
      componentVersions: async () => missing(),
      componentManifests: async () => missing(),
      ingressManifests: async () => missing(),
      addOnManifests: async () => missing(),
      locationManifests: async () => missing(),
      locationBudget: () => new ByteBudget(policy.maxBytesPerResource),
      componentLocation: () => missing(),
      ingressLocation: () => missing(),
      addOnLocation: () => missing(),
    },
    used: () => used,
  };
}

/** The releases a kodata directory holds: what `knative-fleet version` prints, and its -o json. */
interface KodataReleases {
  /** Each component's versions, newest first. */
  releases: Record<Component, readonly string[]>;
  /** The ingresses each Serving minor has, oldest minor first. */
  ingresses: Record<string, string[]>;
  /** The Kubernetes each minor needs at least. */
  minimumKubernetes: Record<string, string>;
}

export async function kodataReleases(location: KodataLocation): Promise<KodataReleases> {
  const source = createKodataSource({ dir: location.dir });
  const releases = {} as Record<Component, readonly string[]>;
  for (const component of COMPONENTS) releases[component] = await source.componentVersions(component);
  const minorsOf = (component: Component) => new Set(releases[component].map(minorOf));
  const ingresses: Record<string, string[]> = {};
  for (const minor of [...minorsOf("knative-serving")].sort(oldestFirst)) {
    ingresses[minor] = [];
    for (const ingress of INGRESSES) {
      if (await isDirectory(join(location.dir, "ingress", minor, ingress))) ingresses[minor].push(ingress);
    }
  }
  const minimumKubernetes: Record<string, string> = {};
  for (const minor of [...new Set([...minorsOf("knative-serving"), ...minorsOf("knative-eventing")])].sort(
    oldestFirst,
  )) {
    const minimum = minimumKubernetesVersion(minor);
    if (minimum !== undefined) minimumKubernetes[minor] = minimum;
  }
  return { releases, ingresses, minimumKubernetes };
}

/**
 * The releases as `knative-fleet version` prints them: one line per component and ingress minor, then the
 * Kubernetes each minor needs at least.
 */
export function describeKodata({ releases, ingresses, minimumKubernetes }: KodataReleases): string[] {
  const list = (items: readonly string[]) => (items.length > 0 ? items.join(", ") : "none");
  const minimums = Object.entries(minimumKubernetes).map(([minor, minimum]) => `${minor} ${minimum}`);
  return [
    ...COMPONENTS.map((component) => `  ${component}: ${list(releases[component])}`),
    ...Object.entries(ingresses).map(([minor, present]) => `  ingress ${minor}: ${list(present)}`),
    ...(minimums.length > 0 ? [`  minimum Kubernetes: ${minimums.join(", ")}`] : []),
  ];
}

const oldestFirst = (a: string, b: string) => newestFirst(b, a);
