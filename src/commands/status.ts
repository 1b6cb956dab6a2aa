import { type Command, EXIT_USAGE } from "./command.ts";

export const statusCommand: Command = {
  name: "status",
  summary: "Show the fleet's KnativeServing/KnativeEventing CRs and their conditions from the hub",
  usage: `Usage: knative-fleet status [flags]

Flags:
  --kubeconfig FILE     hub kubeconfig
  -n, --namespace NS    only CRs in NS
  --output table|json   output format (default table)
  -h, --help            show this help`,
  options: {
    kubeconfig: { type: "string" },
    namespace: { type: "string", short: "n" },
    output: { type: "string" },
  },
  allowPositionals: false,
  async run(_args, ctx) {
    ctx.stderr.write("knative-fleet status: not built yet\n");
    return EXIT_USAGE;
  },
};
