import { writeFile } from "node:fs/promises";
import { ClusterAccess } from "../access/cluster-access.ts";
import { clusterProfileResource } from "../access/clusterprofile-version.ts";
import { loadProviderConfig, type ProviderConfigState } from "../access/provider-config.ts";
import { createTargetResolver } from "../access/target.ts";
import type { KubeClient } from "../kube/client.ts";
import { isUnanswered, KubeApiError } from "../kube/rest.ts";
import { redactSecrets } from "../observability/redact.ts";
import {
  buildPlan,
  type FleetPlan,
  InventoryError,
  type LiveClusters,
  type PlanInventory,
  RevisionError,
  readPlanInventory,
  readRevisions,
  renderMarkdown,
} from "../plan/index.ts";
import { ReleaseLoader } from "../render/index.ts";
import type { AccessSettings, FleetSettings } from "../sync/settings.ts";
import { SCHEMA_VERSION } from "../text/schema-version.ts";
import { commandSettings } from "./access-settings.ts";
import {
  type Command,
  EXIT_CHANGES,
  EXIT_ERROR,
  EXIT_FINDINGS,
  EXIT_OK,
  type ParsedArgs,
  UsageError,
} from "./command.ts";
import { HUB_OPTIONS, hubClient } from "./hub.ts";
import { hubErrorText } from "./hub-error.ts";
import {
  findKodata,
  KODATA_FLAG_HELP,
  KODATA_OPTION,
  type KodataLocation,
  kodataSource,
  missingKodataMessage,
} from "./kodata.ts";
import { OUTPUT_OPTION, outputFormat } from "./output.ts";

const PLAN_FORMATS = ["markdown", "json"] as const;
type PlanFormat = (typeof PLAN_FORMATS)[number];

export const planCommand: Command = {
  name: "plan",
  summary: "Show what every spoke will get from a change (base..head) before it is merged",
  usage: `Usage: knative-fleet plan --repo <dir|url> --base <rev> --head <rev> [--kodata DIR] [flags]

For every CR that merging head into base adds, changes or removes: its cluster, what a created CR sets
(version, high-availability, workloads, PDBs, config), the objects created, changed (field by field) and
deleted, head's validation errors, version and ingress checks, and what a removed file uninstalls.
Offline (no --kubeconfig or --context), each CR's rendered base is compared with its rendered head; live,
each cluster is read and changes come from server-side dry runs. Nothing is written anywhere. The plan
is of commits: a checkout's uncommitted edits to fleet files are named, not planned. Secret data and
credential-like values are masked. Same commits, same cluster state: same output. See docs/plan.md.

Exit code 0: nothing wrong; 1: any error the plan shows (validation, placements, the hub's admission,
checks that fail); 2: usage errors, or the hub or a cluster that could not be read (the plan, or that
cluster's part of it, is then offline, with one ⚠️ line saying which and why); with --detailed-exitcode,
3: nothing wrong and the merge changes a CR.

Flags:
  --repo DIR|URL                        fleet repository: a local clone (any ref or commit), or an http(s)
                                        URL (branches only; credentials as https://user:token@host/...)
  --base REV                            the revision merged into: a branch, origin/main, a tag, a
                                        commit id (short or full), any of them with ~N or ^N (HEAD~1)
  --head REV                            the proposed change (same forms)
${KODATA_FLAG_HELP}; the directory the service
                                        uses, needed only when a changed CR is rendered
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
  -o, --output markdown|json            output format (default markdown); json: {schemaVersion, ...the plan}
  --output-file FILE                    write to FILE instead of stdout
  --detailed-exitcode                   exit 3 when the merge changes a CR and nothing is wrong (0: it
                                        changes nothing), as terraform plan -detailed-exitcode
  -h, --help                            show this help`,
  options: {
    repo: { type: "string" },
    base: { type: "string" },
    head: { type: "string" },
    ...KODATA_OPTION,
    ...HUB_OPTIONS,
    "clusterprofile-provider-file": { type: "string" },
    config: { type: "string" },
    "cluster-profiles": { type: "string" },
    ...OUTPUT_OPTION,
    "output-file": { type: "string" },
    "detailed-exitcode": { type: "boolean" },
  },
  outputFormats: PLAN_FORMATS,
  allowPositionals: false,
  async run(args, ctx) {
    const options = await parseOptions(args);
    const { settings } = options;
    const kodata = kodataSource(options.kodata, settings.locations);
    let plan: FleetPlan;
    try {
      const revisions = await readRevisions(options.repo, options, settings.selection);
      const hub = await readHub(options, settings.access);
      if (hub.offlineReason !== undefined)
        ctx.stderr.write(`knative-fleet plan: ⚠️ ${hub.offlineReason}: planned offline\n`);
      try {
        plan = await buildPlan(revisions, {
          releases: new ReleaseLoader(kodata.source),
          settings,
          ...(options.kodata && { kodataDir: options.kodata.dir }),
          ...(options.repository && { repository: options.repository }),
          inventory: hub.inventory,
          ...(hub.clusters && { clusters: hub.clusters.live }),
          ...(hub.offlineReason !== undefined && { offlineReason: hub.offlineReason }),
        });
      } finally {
        await hub.clusters?.access.close();
      }
    } catch (err) {
      if (
        !(err instanceof RevisionError || err instanceof ClusterSetupError || err instanceof InventoryError)
      )
        throw err;
      ctx.stderr.write(`knative-fleet plan: ${err.message}\n`);
      return EXIT_ERROR;
    }
    if (kodata.used()) {
      ctx.stderr.write(`knative-fleet plan: ${missingKodataMessage()}\n`);
      return EXIT_ERROR;
    }
    const text = redactSecrets(
      options.format === "json"
        ? `${JSON.stringify({ schemaVersion: SCHEMA_VERSION, ...plan }, null, 2)}\n`
        : renderMarkdown(plan),
    );
    if (options.outputFile === undefined) ctx.stdout.write(text);
    else await writeFile(options.outputFile, text);
    return planExitCode(plan, options.detailedExitCode);
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
  /** The service's repository.url (--config): live, the hub's CRs are that repository's. */
  repository?: string;
  /** --detailed-exitcode: 3 when the merge changes a CR and nothing is wrong. */
  detailedExitCode: boolean;
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
  const { settings, config } = commandSettings(text("config"));
  return {
    settings,
    ...(config && { repository: config.repository.url }),
    detailedExitCode: values["detailed-exitcode"] === true,
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

/** The hub kubeconfig or the provider file cannot be used: a usage error, nothing is planned. */
class ClusterSetupError extends Error {}

/** What a plan knows of the clusters before it starts: the inventory, and live, the hub and its spokes. */
interface HubReading {
  inventory: PlanInventory | undefined;
  clusters?: { live: LiveClusters; access: ClusterAccess };
  /** Live, but the hub could not be read: which hub and why, and the plan is offline. */
  offlineReason?: string;
}

/**
 * Offline, the --cluster-profiles snapshot if given. Live, the hub's ClusterProfiles (the snapshot instead
 * if given) and access to the spokes. A hub that cannot be read (down, moved, a rotated kubeconfig) does not
 * cost the plan: it is made offline, with one line that says which hub and why, instead of a stack frame.
 */
async function readHub(options: PlanCommandOptions, settings: AccessSettings): Promise<HubReading> {
  const snapshot = options.clusterProfiles !== undefined ? { snapshot: options.clusterProfiles } : {};
  const { hub } = options;
  if (hub === undefined) return { inventory: await readPlanInventory(snapshot) };
  let providers: ProviderConfigState;
  try {
    providers = await loadProviderConfig(options.providerFile);
  } catch (err) {
    throw new ClusterSetupError((err as Error).message);
  }
  let inventory: PlanInventory | undefined;
  try {
    const { group, version } = await clusterProfileResource(hub);
    inventory = await readPlanInventory({
      ...snapshot,
      hub: { client: hub, clusterProfileApiVersion: `${group}/${version}` },
    });
  } catch (err) {
    if (!(isUnanswered(err) || err instanceof KubeApiError)) throw err;
    const offlineReason = hubErrorText(hub.rest.server, err, "read the ClusterProfiles");
    return { inventory: await readPlanInventory(snapshot), offlineReason };
  }
  // One-shot: no ClusterProfile watch, every spoke is resolved by reading its ClusterProfile once. Without
  // a provider file every spoke resolves to MulticlusterDisabled, which the plan reports per spoke.
  const access = new ClusterAccess({
    hub,
    providers,
    namespaces: settings.namespaces,
    policy: settings.policy,
  });
  return { inventory, clusters: { live: { hub, targets: createTargetResolver(hub, access) }, access } };
}

/**
 * 2 when the hub or a cluster could not be read (the plan is offline, or partly), 1 for any error, else 0; with
 * --detailed-exitcode, 3 when the merge changes a CR and nothing is wrong.
 */
function planExitCode(plan: FleetPlan, detailed: boolean): number {
  if (plan.offlineReason !== undefined) return EXIT_ERROR;
  const findings = plan.clusters.flatMap((cluster) => cluster.resources.flatMap((r) => r.findings));
  if (findings.some((finding) => finding.code === "cluster-unreachable")) return EXIT_ERROR;
  if (plan.errors > 0) return EXIT_FINDINGS;
  return detailed && plan.changes > 0 ? EXIT_CHANGES : EXIT_OK;
}
