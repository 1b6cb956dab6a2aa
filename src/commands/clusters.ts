import { type ClusterReport, surveyClusters } from "../access/cluster-survey.ts";
import { causeText } from "../access/errors.ts";
import {
  loadProviderConfig,
  ProviderConfigError,
  type ProviderConfigState,
} from "../access/provider-config.ts";
import type { KubeClient } from "../kube/client.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../kube/kubeconfig.ts";
import { accessSettings } from "./access-settings.ts";
import { type Command, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE } from "./command.ts";
import { outputFormat, renderJson, renderTable } from "./output.ts";

export const clustersCommand: Command = {
  name: "clusters",
  summary: "List ClusterProfiles with health, access provider, server, version and round-trip time",
  usage: `Usage: knative-fleet clusters [flags]

Tries every ClusterProfile the way the reconciler does (access provider plugin, then the spoke's /version)
and shows what it found, or why the cluster cannot be reached. Exit code 1 when any cluster cannot be reached.

Flags:
  --kubeconfig FILE                     hub kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
  --clusterprofile-provider-file FILE   access-provider config (cluster-inventory-api pkg/access JSON)
  --config FILE                         the service's config file: its ClusterProfile namespaces and access
                                        settings (default: the service's defaults, namespace fleet-system)
  -n, --namespace NS                    only ClusterProfiles in NS
  --output table|json                   output format (default table)
  -h, --help                            show this help`,
  options: {
    kubeconfig: { type: "string" },
    "clusterprofile-provider-file": { type: "string" },
    config: { type: "string" },
    namespace: { type: "string", short: "n" },
    output: { type: "string" },
  },
  allowPositionals: false,
  async run(args, ctx) {
    const output = outputFormat(args.values.output);
    const settings = accessSettings(args.values.config as string | undefined);
    let providers: ProviderConfigState;
    try {
      providers = await loadProviderConfig(args.values["clusterprofile-provider-file"] as string | undefined);
    } catch (err) {
      if (!(err instanceof ProviderConfigError)) throw err;
      ctx.stderr.write(`knative-fleet clusters: ${err.message}\n`);
      return EXIT_USAGE;
    }
    const kubeconfig = args.values.kubeconfig as string | undefined;
    let hub: KubeClient;
    try {
      hub = clientFromKubeConfig(loadKubeConfig(kubeconfig));
    } catch (err) {
      ctx.stderr.write(
        `knative-fleet clusters: cannot load the hub kubeconfig ${kubeconfig ?? ""}: ${(err as Error).message}\n`,
      );
      return EXIT_USAGE;
    }

    let reports: ClusterReport[];
    try {
      reports = await surveyClusters({
        hub,
        providers,
        namespace: args.values.namespace as string | undefined,
        allowedNamespaces: settings.namespaces,
        policy: settings.policy,
      });
    } catch (err) {
      ctx.stderr.write(`knative-fleet clusters: cannot list ClusterProfiles on the hub: ${causeText(err)}\n`);
      return EXIT_FINDINGS;
    }
    ctx.stdout.write(output === "json" ? renderJson(reports) : renderClusterTable(reports));
    return reports.every((r) => r.reachable) ? EXIT_OK : EXIT_FINDINGS;
  },
};

/** The table `knative-fleet clusters` prints: one row per ClusterProfile, the reason last (it is long). */
export function renderClusterTable(reports: readonly ClusterReport[]): string {
  if (reports.length === 0) return "No ClusterProfiles found.\n";
  const header = ["NAMESPACE", "NAME", "HEALTHY", "PROVIDER", "SERVER", "VERSION", "RTT", "STATUS"];
  const rows = reports.map((r) => [
    r.namespace,
    r.name,
    r.healthy,
    r.provider ?? "-",
    r.server ?? "-",
    r.kubernetesVersion ?? "-",
    r.roundTripMs === undefined ? "-" : `${r.roundTripMs.toFixed(1)}ms`,
    r.reachable ? "Reachable" : `${r.reason}: ${r.message}`,
  ]);
  return renderTable(header, rows);
}
