import { type Command, EXIT_USAGE } from "./command.ts";

export const planCommand: Command = {
  name: "plan",
  summary: "Show what every spoke will get from a change (base..head) before it is merged",
  usage: `Usage: knative-fleet plan --repo <dir|url> --base <ref> --head <ref> [flags]

Flags:
  --repo DIR|URL                        fleet repository
  --base REF                            the branch or commit merged into
  --head REF                            the proposed change
  --kubeconfig FILE                     hub kubeconfig, for a live dry run against the spokes
  --clusterprofile-provider-file FILE   access-provider config
  --format markdown|json                output format (default markdown)
  --output FILE                         write to FILE instead of stdout
  -h, --help                            show this help`,
  options: {
    repo: { type: "string" },
    base: { type: "string" },
    head: { type: "string" },
    kubeconfig: { type: "string" },
    "clusterprofile-provider-file": { type: "string" },
    format: { type: "string" },
    output: { type: "string" },
  },
  allowPositionals: false,
  async run(_args, ctx) {
    ctx.stderr.write("knative-fleet plan: not built yet\n");
    return EXIT_USAGE;
  },
};
