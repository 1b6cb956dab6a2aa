import { readFile, writeFile } from "node:fs/promises";
import { ClusterAccess } from "../access/cluster-access.ts";
import { clusterProfileResource } from "../access/clusterprofile-version.ts";
import { loadProviderConfig, type ProviderConfigState } from "../access/provider-config.ts";
import { createTargetResolver } from "../access/target.ts";
import { buildFleetModel } from "../fleet/model.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import { redactSecrets } from "../observability/redact.ts";
import type { Inventory } from "../placement/inventory.ts";
import {
  type PlacementPlan,
  planPlacements,
  readHubInventory,
  readInventorySnapshot,
  readSnapshotObjects,
  renderPlacementPlan,
} from "../placement/plan.ts";
import {
  buildPlan,
  clusterKubernetesVersions,
  type FleetPlan,
  type LiveClusters,
  RevisionError,
  type Revisions,
  readRevisions,
  renderMarkdown,
} from "../plan/index.ts";
import { ReleaseLoader } from "../render/index.ts";
import { planRollout, type RolloutPlan, renderRolloutPlan } from "../rollout/plan.ts";
import type { AccessSettings, FleetSettings } from "../sync/settings.ts";
import { commandSettings } from "./access-settings.ts";
import { type Command, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, type ParsedArgs, UsageError } from "./command.ts";
import { HUB_OPTIONS, hubClient } from "./hub.ts";
import { findKodata, type KodataLocation, kodataSource, missingKodataMessage } from "./kodata.ts";
import { OUTPUT_OPTION, outputFormat } from "./output.ts";

const PLAN_FORMATS = ["markdown", "json"] as const;
type PlanFormat = (typeof PLAN_FORMATS)[number];

export const planCommand: Command = {
  name: "plan",
  summary: "Show what every spoke will get from a change (base..head) before it is merged",
  usage: `Usage: knative-fleet plan --repo <dir|url> --base <rev> --head <rev> [--kodata DIR] [flags]

For every CR that merging head into base adds, changes or removes: its cluster, the objects created,
changed (field by field) and deleted, head's validation errors, version and ingress checks, and what a
removed file uninstalls. Offline (no --kubeconfig or --context), each CR's rendered base is compared with its rendered
head; live, each cluster is read and changes come from server-side dry runs. Nothing is written anywhere.
Secret data and credential-like values are masked. Same commits, same cluster state: same output.

Exit code 0: nothing wrong; 1: validation errors or checks that fail (the hub would refuse or fail a CR);
2: usage errors, or a cluster that could not be read (its part of the plan is then offline).

Flags:
  --repo DIR|URL                        fleet repository: a local clone (any ref or commit), or an http(s)
                                        URL (branches only; credentials as https://user:token@host/...)
  --base REV                            the revision merged into: a branch, origin/main, a tag, a
                                        commit id (short or full), any of them with ~N or ^N (HEAD~1)
  --head REV                            the proposed change (same forms)
  --kodata DIR                          Knative release manifests in the operator's kodata layout, the
                                        directory the service uses (default: $KO_DATA_PATH, else the
                                        fetched cache; only needed when a changed CR is rendered)
  --kubeconfig FILE                     hub kubeconfig: read the hub and the spokes for a live plan
  --context NAME                        the kubeconfig context of the hub (live plan; default: the
                                        current context of --kubeconfig, else of $KUBECONFIG/~/.kube/config)
  --clusterprofile-provider-file FILE   access-provider config, to reach the spokes (needs --kubeconfig)
  --config FILE                         the service's config file: file selection, default namespace, prune
                                        safeguards, manifest locations, the ClusterProfile namespaces CRs
                                        may target and the access settings, so the plan treats the change
                                        as the service will (default: the service's defaults; manifest
                                        locations outside kodata are then refused)
  --cluster-profiles FILE               offline: ClusterProfiles and PlacementDecisions (a kubectl -o yaml
                                        list) that placements select from; live, the hub's are read
  -o, --output markdown|json            output format (default markdown)
  --output-file FILE                    write to FILE instead of stdout
  -h, --help                            show this help`,
  options: {
    repo: { type: "string" },
    base: { type: "string" },
    head: { type: "string" },
    kodata: { type: "string" },
    ...HUB_OPTIONS,
    "clusterprofile-provider-file": { type: "string" },
    config: { type: "string" },
    "cluster-profiles": { type: "string" },
    ...OUTPUT_OPTION,
    "output-file": { type: "string" },
  },
  outputFormats: PLAN_FORMATS,
  allowPositionals: false,
  async run(args, ctx) {
    const options = await parseOptions(args);
    let revisions: Revisions;
    let clusters: Awaited<ReturnType<typeof connect>>;
    try {
      revisions = await readRevisions(options.repo, options, options.settings.selection);
      clusters = await connect(options.hub, options.providerFile, options.settings.access);
    } catch (err) {
      if (!(err instanceof RevisionError || err instanceof ClusterSetupError)) throw err;
      ctx.stderr.write(`knative-fleet plan: ${err.message}\n`);
      return EXIT_ERROR;
    }
    let plan: FleetPlan;
    let placements: PlacementPlan;
    let rollout: RolloutPlan | undefined;
    const { settings } = options;
    const kodata = kodataSource(options.kodata, settings.locations);
    const hub = clusters && {
      client: clusters.live.hub,
      clusterProfileApiVersion: clusters.clusterProfileApiVersion,
    };
    try {
      plan = await buildPlan(revisions, {
        releases: new ReleaseLoader(kodata.source),
        clusters: clusters?.live,
        kubernetesVersions: clusterKubernetesVersions(await readClusterProfiles(options, hub)),
        defaultNamespace: settings.defaultNamespace,
        prune: settings.prune,
      });
      placements = await placementPlan(revisions, options, hub);
      rollout = await rolloutPlan(revisions, options, hub);
    } catch (err) {
      if (!(err instanceof ClusterSetupError)) throw err;
      ctx.stderr.write(`knative-fleet plan: ${err.message}\n`);
      return EXIT_ERROR;
    } finally {
      await clusters?.access.close();
    }
    if (kodata.used()) {
      ctx.stderr.write(`knative-fleet plan: ${missingKodataMessage()}\n`);
      return EXIT_ERROR;
    }
    const text = redactSecrets(
      options.format === "json"
        ? `${JSON.stringify({ ...plan, placements, ...(rollout ? { rollout } : {}) }, null, 2)}\n`
        : `${renderMarkdown(plan)}${placements.placements.length > 0 ? `\n${renderPlacementPlan(placements)}\n` : ""}${rollout ? `\n${renderRolloutPlan(rollout)}\n` : ""}`,
    );
    if (options.outputFile === undefined) ctx.stdout.write(text);
    else await writeFile(options.outputFile, text);
    const code = exitCode(plan);
    return code === EXIT_OK && placements.diagnostics.length > 0 ? EXIT_FINDINGS : code;
  },
};

interface PlanCommandOptions {
  repo: string;
  base: string;
  head: string;
  kodata: KodataLocation | undefined;
  /** The hub, for a live plan (--kubeconfig or --context); undefined for an offline one. */
  hub?: KubeClient;
  providerFile?: string;
  clusterProfiles?: string;
  format: PlanFormat;
  outputFile?: string;
  settings: FleetSettings;
}

async function parseOptions(args: ParsedArgs): Promise<PlanCommandOptions> {
  const { values } = args;
  const text = (name: string) => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const required = (name: string) => {
    const value = text(name);
    if (value === undefined || value === "") throw new UsageError(`--${name} is required`);
    return value;
  };
  const format = outputFormat(values.output, PLAN_FORMATS, "--output-file FILE writes to a file");
  const kodata = await findKodata(text("kodata"));
  const live = text("kubeconfig") !== undefined || text("context") !== undefined;
  const providerFile = text("clusterprofile-provider-file");
  if (providerFile !== undefined && !live) {
    throw new UsageError(
      "--clusterprofile-provider-file needs --kubeconfig (or --context): the ClusterProfiles are on the hub",
    );
  }
  return {
    settings: commandSettings(text("config")).settings,
    repo: required("repo"),
    base: required("base"),
    head: required("head"),
    kodata,
    hub: live ? hubClient(args) : undefined,
    providerFile,
    clusterProfiles: text("cluster-profiles"),
    format,
    outputFile: text("output-file"),
  };
}

/** What each placement selects before and after the merge: from the hub when live, else the snapshot. */
async function placementPlan(
  revisions: Revisions,
  options: PlanCommandOptions,
  hub: { client: LiveClusters["hub"]; clusterProfileApiVersion: string } | undefined,
): Promise<PlacementPlan> {
  const { defaultNamespace, access } = options.settings;
  const modelOf = (files: Revisions["base"]["files"]) => buildFleetModel(files, { defaultNamespace });
  const expand = { allowedNamespaces: access.namespaces };
  const [base, head] = [modelOf(revisions.base.files), modelOf(revisions.head.files)];
  if (base.placements.length === 0 && head.placements.length === 0) {
    return { inventory: "none", placements: [], diagnostics: [] };
  }
  const from = await readInventory(options, hub);
  return planPlacements(base, head, from, expand);
}

/** The --cluster-profiles snapshot, read by `parse`; an unreadable or invalid one is a usage error. */
async function readSnapshot<T>(path: string, parse: (path: string, text: string) => T): Promise<T> {
  const text = await readFile(path, "utf8").catch((err: Error) => {
    throw new ClusterSetupError(`--cluster-profiles: ${err.message}`);
  });
  try {
    return parse(path, text);
  } catch (err) {
    throw new ClusterSetupError((err as Error).message);
  }
}

/**
 * The ClusterProfiles the plan reads each cluster's Kubernetes version from: the snapshot file, the hub's
 * (none when the hub does not list them), or none.
 */
async function readClusterProfiles(
  options: PlanCommandOptions,
  hub: { client: LiveClusters["hub"]; clusterProfileApiVersion: string } | undefined,
): Promise<KubeObject[]> {
  if (options.clusterProfiles !== undefined)
    return readSnapshot(options.clusterProfiles, readSnapshotObjects);
  if (hub === undefined) return [];
  const profiles = await hub.client
    .list(hub.clusterProfileApiVersion, "ClusterProfile")
    .catch(() => undefined);
  return profiles?.items ?? [];
}

/** The ClusterProfiles (and PlacementDecisions) selection reads: a snapshot file, the hub, or none. */
async function readInventory(
  options: PlanCommandOptions,
  hub: { client: LiveClusters["hub"]; clusterProfileApiVersion: string } | undefined,
): Promise<{ source: "hub" | "snapshot"; inventory: Inventory } | undefined> {
  if (options.clusterProfiles !== undefined) {
    return {
      source: "snapshot",
      inventory: await readSnapshot(options.clusterProfiles, readInventorySnapshot),
    };
  }
  if (hub !== undefined) {
    return { source: "hub", inventory: await readHubInventory(hub.client, hub.clusterProfileApiVersion) };
  }
  return undefined;
}

/** The waves the merge goes through, the clusters' labels read like placement selection reads them. */
async function rolloutPlan(
  revisions: Revisions,
  options: PlanCommandOptions,
  hub: { client: LiveClusters["hub"]; clusterProfileApiVersion: string } | undefined,
): Promise<RolloutPlan | undefined> {
  const { defaultNamespace } = options.settings;
  const base = buildFleetModel(revisions.base.files, { defaultNamespace });
  const head = buildFleetModel(revisions.head.files, { defaultNamespace });
  if (head.rollout.policy === undefined && head.rollout.failedPaths.length === 0) return undefined;
  return planRollout(base, head, (await readInventory(options, hub))?.inventory.clusters);
}

/** The hub kubeconfig or the provider file cannot be used: a usage error, nothing is planned. */
class ClusterSetupError extends Error {}

/** The hub and the spokes behind it, for a live plan; undefined for an offline one. */
async function connect(
  hub: KubeClient | undefined,
  providerFile: string | undefined,
  settings: AccessSettings,
): Promise<{ live: LiveClusters; access: ClusterAccess; clusterProfileApiVersion: string } | undefined> {
  if (hub === undefined) return undefined;
  let providers: ProviderConfigState;
  try {
    providers = await loadProviderConfig(providerFile);
  } catch (err) {
    throw new ClusterSetupError((err as Error).message);
  }
  // One-shot: no ClusterProfile watch, every spoke is resolved by reading its ClusterProfile once. Without
  // a provider file every spoke resolves to MulticlusterDisabled, which the plan reports per spoke.
  const access = new ClusterAccess({
    hub,
    providers,
    namespaces: settings.namespaces,
    policy: settings.policy,
  });
  const { group, version } = await clusterProfileResource(hub);
  return {
    live: { hub, targets: createTargetResolver(hub, access) },
    access,
    clusterProfileApiVersion: `${group}/${version}`,
  };
}

/** 2 when a cluster could not be read (the plan is partly offline), 1 for errors, else 0. */
function exitCode(plan: FleetPlan): number {
  const findings = plan.clusters.flatMap((cluster) => cluster.resources.flatMap((r) => r.findings));
  if (findings.some((finding) => finding.code === "cluster-unreachable")) return EXIT_ERROR;
  return plan.errors > 0 ? EXIT_FINDINGS : EXIT_OK;
}
