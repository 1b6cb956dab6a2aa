import type { KubeClient } from "../kube/client.ts";
import { clientFromKubeConfig, type KubeConfig, loadKubeConfig } from "../kube/kubeconfig.ts";
import { type ParsedArgs, UsageError } from "./command.ts";

// How every command that reads the hub is pointed at it, with kubectl's flags: --kubeconfig and --context.

export const HUB_OPTIONS = {
  kubeconfig: { type: "string" },
  context: { type: "string" },
} as const;

/** Where the hub's kubeconfig is looked for without --kubeconfig: the help and docs/cli.md say it so. */
export const KUBECONFIG_DEFAULT = "$KUBECONFIG, ~/.kube/config, in-cluster";
/** The context used without --context. */
export const CONTEXT_DEFAULT = "the current context";

export const HUB_FLAGS_HELP = `  --kubeconfig FILE                     hub kubeconfig (default: ${KUBECONFIG_DEFAULT})
  --context NAME                        the kubeconfig context of the hub (default: ${CONTEXT_DEFAULT})`;

/** The hub's kubeconfig as --kubeconfig and --context name it; a file that cannot be used is a usage error. */
export function hubKubeConfig(args: ParsedArgs): KubeConfig {
  return usable(args, () =>
    loadKubeConfig(args.values.kubeconfig as string | undefined, args.values.context as string | undefined),
  );
}

/** A client for the hub as --kubeconfig and --context name it (its CA file read now). */
export function hubClient(args: ParsedArgs): KubeClient {
  return usable(args, () => clientFromKubeConfig(hubKubeConfig(args)));
}

function usable<T>({ values }: ParsedArgs, load: () => T): T {
  try {
    return load();
  } catch (err) {
    if (err instanceof UsageError) throw err;
    const file = values.kubeconfig as string | undefined;
    throw new UsageError(
      `cannot load the hub kubeconfig${file ? ` ${file}` : ""}: ${(err as Error).message}`,
    );
  }
}
