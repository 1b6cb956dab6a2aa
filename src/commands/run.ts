import { createLogger } from "../observability/log.ts";
import { effectivePollInterval } from "../reconcile/start.ts";
import { ConfigError, loadServiceConfig, parseDuration } from "../service/config.ts";
import { keepServingOnUncaughtErrors } from "../service/http-server.ts";
import { processIdentity } from "../service/leader-election.ts";
import { FleetService } from "../service/service.ts";
import { deflateWithoutWebStreams } from "../source/index.ts";
import { type Command, EXIT_ERROR, UsageError } from "./command.ts";
import { HUB_FLAGS_HELP, HUB_OPTIONS, hubKubeConfig } from "./hub.ts";
import { findKodata, KODATA_FLAG_HELP, KODATA_OPTION, missingKodataMessage } from "./kodata.ts";

export const runCommand: Command = {
  name: "run",
  summary: "Run the reconciler: watch the fleet repository and make every cluster match it",
  usage: `Usage: knative-fleet run --config FILE [flags]

Runs the service: syncs the fleet Git repository into hub CRs and reconciles each onto its cluster.
Stops cleanly on SIGTERM/SIGINT.

Flags:
  --config FILE                         service config file (YAML; keys in charts/knative-fleet/README.md)
${HUB_FLAGS_HELP}
  --clusterprofile-provider-file FILE   access-provider config (cluster-inventory-api pkg/access JSON);
                                        without it multicluster is off
  --remote-deployments-poll-interval D  requeue interval while spoke Deployments become Available, where
                                        they cannot be watched (Go duration, default 10s; below 1s falls
                                        back to the default)
${KODATA_FLAG_HELP}
  -h, --help                            show this help`,
  options: {
    config: { type: "string" },
    ...HUB_OPTIONS,
    "clusterprofile-provider-file": { type: "string" },
    "remote-deployments-poll-interval": { type: "string" },
    ...KODATA_OPTION,
  },
  allowPositionals: false,
  async run(args, ctx) {
    const { values } = args;
    const configPath = values.config as string | undefined;
    if (!configPath) throw new UsageError("--config is required");
    // Like every command: --kodata, $KO_DATA_PATH (the image's bundled releases), else the fetched cache.
    const kodata = await findKodata(values.kodata);
    if (kodata === undefined) throw new UsageError(missingKodataMessage());
    let config: ReturnType<typeof loadServiceConfig>;
    let pollIntervalMs: number | undefined;
    try {
      config = loadServiceConfig(configPath);
      const flag = values["remote-deployments-poll-interval"] as string | undefined;
      if (flag !== undefined) {
        pollIntervalMs = effectivePollInterval(parseDuration(flag));
      }
    } catch (err) {
      if (err instanceof ConfigError) {
        ctx.stderr.write(`knative-fleet run: ${err.message}\n`);
        return EXIT_ERROR;
      }
      throw err;
    }
    const log = createLogger(config.logLevel);
    keepServingOnUncaughtErrors(log);
    deflateWithoutWebStreams();
    const service = new FleetService({
      config,
      hub: hubKubeConfig(args),
      providerFile: values["clusterprofile-provider-file"] as string | undefined,
      kodataDir: kodata.dir,
      pollIntervalMs,
      identity: processIdentity(process.env.POD_NAME),
      // A Pod's UID binds its shard member to it (the chart sets POD_UID); without one sharding refuses.
      ...(process.env.POD_UID && {
        memberIdentity: processIdentity(process.env.POD_NAME, process.env.POD_UID),
      }),
      log,
    });
    try {
      await service.start();
    } catch (err) {
      // One log line like every other the service writes (a stack on stderr is no log line), then exit 2 so
      // the Pod restarts and tries again; what start had opened is closed so the process can end.
      log.fatal({ err: String(err) }, "could not start; exiting so a restart tries again");
      await service.stop();
      return EXIT_ERROR;
    }
    await new Promise<void>((resolve) => {
      const shutdown = (signal: string) => {
        log.info({ signal }, "shutting down");
        void service.stop().then(resolve);
      };
      process.once("SIGTERM", () => shutdown("SIGTERM"));
      process.once("SIGINT", () => shutdown("SIGINT"));
    });
    return 0;
  },
};
