import { type Command, EXIT_USAGE } from "./command.ts";

export const runCommand: Command = {
  name: "run",
  summary: "Run the reconciler: watch the fleet repository and make every cluster match it",
  usage: `Usage: knative-fleet run [flags]

Runs the service: syncs the fleet Git repository into hub CRs and reconciles each onto its cluster.

Flags:
  --config FILE                         service config file (YAML)
  --kubeconfig FILE                     hub kubeconfig (default: in-cluster, then $KUBECONFIG)
  --clusterprofile-provider-file FILE   access-provider config (cluster-inventory-api pkg/access JSON)
  --remote-deployments-poll-interval D  requeue interval while spoke Deployments become Available (default 10s)
  -h, --help                            show this help`,
  options: {
    config: { type: "string" },
    kubeconfig: { type: "string" },
    "clusterprofile-provider-file": { type: "string" },
    "remote-deployments-poll-interval": { type: "string" },
  },
  allowPositionals: false,
  async run(_args, ctx) {
    ctx.stderr.write("knative-fleet run: the reconciler is not built yet\n");
    return EXIT_USAGE;
  },
};
