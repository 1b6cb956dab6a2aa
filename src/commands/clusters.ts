import { type ClusterReport, surveyClusters } from "../access/cluster-survey.ts";
import { causeText } from "../access/errors.ts";
import {
  loadProviderConfig,
  ProviderConfigError,
  type ProviderConfigState,
} from "../access/provider-config.ts";
import { accessSettings } from "./access-settings.ts";
import { type Command, EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, UsageError } from "./command.ts";
import { HUB_FLAGS_HELP, HUB_OPTIONS, hubClient } from "./hub.ts";
import {
  type Column,
  LISTING_FORMATS,
  OUTPUT_OPTION,
  outputFormat,
  renderColumns,
  renderData,
} from "./output.ts";

export const clustersCommand: Command = {
  name: "clusters",
  summary: "List ClusterProfiles with health, access provider, server, version and round-trip time",
  usage: `Usage: knative-fleet clusters [flags] [NAME...]

Tries every ClusterProfile the way the reconciler does (access provider plugin, then the spoke's /version)
and shows what it found, or why the cluster cannot be reached; -o wide adds each spoke's server. With NAMEs,
only the ClusterProfiles of those names.
Exit code 0 when every cluster can be reached, 1 when any cannot, 2 when the hub cannot be read
(docs/cli.md#exit-codes).

Flags:
${HUB_FLAGS_HELP}
  --clusterprofile-provider-file FILE   access-provider config (cluster-inventory-api pkg/access JSON)
  --config FILE                         the service's config file: its ClusterProfile namespaces and access
                                        settings (default: the service's defaults, namespace fleet-system)
  -n, --namespace NS                    only ClusterProfiles in NS
  -o, --output table|wide|json|yaml     output format (default table)
  -h, --help                            show this help`,
  options: {
    ...HUB_OPTIONS,
    "clusterprofile-provider-file": { type: "string" },
    config: { type: "string" },
    namespace: { type: "string", short: "n" },
    ...OUTPUT_OPTION,
  },
  outputFormats: LISTING_FORMATS,
  allowPositionals: true,
  async run(args, ctx) {
    const output = outputFormat(args.values.output, LISTING_FORMATS);
    const settings = accessSettings(args.values.config as string | undefined);
    let providers: ProviderConfigState;
    try {
      providers = await loadProviderConfig(args.values["clusterprofile-provider-file"] as string | undefined);
    } catch (err) {
      if (!(err instanceof ProviderConfigError)) throw err;
      throw new UsageError(err.message);
    }
    const hub = hubClient(args);
    let reports: ClusterReport[];
    try {
      reports = await surveyClusters({
        hub,
        providers,
        namespace: args.values.namespace as string | undefined,
        names: args.positionals,
        allowedNamespaces: settings.namespaces,
        policy: settings.policy,
      });
    } catch (err) {
      ctx.stderr.write(
        `knative-fleet clusters: cannot list ClusterProfiles on the hub ${hub.rest.server}: ${causeText(err)}\n`,
      );
      return EXIT_ERROR;
    }
    ctx.stdout.write(renderData(output, reports) ?? renderClusterTable(reports, output === "wide"));
    return reports.every((r) => r.reachable) ? EXIT_OK : EXIT_FINDINGS;
  },
};

const CLUSTER_COLUMNS: readonly Column<ClusterReport>[] = [
  { header: "NAMESPACE", cell: (r) => r.namespace },
  { header: "NAME", cell: (r) => r.name },
  { header: "HEALTHY", cell: (r) => r.healthy },
  { header: "PROVIDER", cell: (r) => r.provider ?? "-" },
  { header: "SERVER", cell: (r) => r.server ?? "-", wide: true },
  { header: "VERSION", cell: (r) => r.kubernetesVersion ?? "-" },
  { header: "RTT", cell: (r) => (r.roundTripMs === undefined ? "-" : `${r.roundTripMs.toFixed(1)}ms`) },
  { header: "STATUS", cell: (r) => (r.reachable ? "Reachable" : `${r.reason}: ${r.message}`) },
];

/** The table `knative-fleet clusters` prints: one row per ClusterProfile, the reason last (it is long). */
export function renderClusterTable(reports: readonly ClusterReport[], wide = false): string {
  if (reports.length === 0) return "No ClusterProfiles found.\n";
  return renderColumns(CLUSTER_COLUMNS, reports, wide);
}
