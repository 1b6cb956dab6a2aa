import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse, stringify } from "yaml";
import { loadKubeConfig } from "../../src/kube/kubeconfig.ts";
import { createLogger, silentLogger } from "../../src/observability/log.ts";
import type { ServiceConfig } from "../../src/service/config.ts";
import { FleetService } from "../../src/service/service.ts";
import type { Sandbox } from "../sandbox/index.ts";
import { nextMetricsPort, ServiceProcess } from "./service-process.ts";
import { knativeReleasesDir } from "./shared.ts";

export interface TestServiceConfig {
  repositoryUrl: string;
  /** Hub namespace of the fleet's CRs (the fleet-example's is knative-fleet). */
  namespace?: string;
  webhookSecret?: string;
  statusInterval?: string;
  metricsPort?: number;
  leaderElection?: { leaseName: string; namespace: string };
  /** How often a converged CR is checked for drift (the service's default: 5m). */
  resyncInterval?: string;
}

/** Writes a service config file (the chart's contract) for a test or the demo; returns its path. */
export function writeServiceConfig(options: TestServiceConfig): string {
  const dir = mkdtempSync(join(tmpdir(), "knative-fleet-service-"));
  const config: Record<string, unknown> = {
    repository: { url: options.repositoryUrl, branch: "main", pathGlob: "clusters/**/*.yaml" },
    cacheDir: join(dir, "cache"),
    pollSchedule: "*/5 * * * * *",
    defaultNamespace: options.namespace ?? "knative-fleet",
    status: {
      path: "status/",
      branch: "main",
      authorName: "knative-fleet",
      authorEmail: "knative-fleet@noreply.invalid",
      interval: options.statusInterval ?? "1s",
    },
    remoteDeploymentsPollInterval: "1s",
    metricsPort: options.metricsPort ?? 0,
    bindAddress: "127.0.0.1",
    logLevel: "warn",
  };
  if (options.webhookSecret) {
    const secretFile = join(dir, "webhook-secret");
    writeFileSync(secretFile, options.webhookSecret);
    config.webhook = { port: 0, secretFile };
  }
  if (options.resyncInterval) config.resyncInterval = options.resyncInterval;
  if (options.leaderElection) config.leaderElection = { enabled: true, ...options.leaderElection };
  const path = join(dir, "config.yaml");
  writeFileSync(path, stringify(config));
  return path;
}

/**
 * A FleetService in this process against the sandbox, started as `run` starts it (the sandbox's hub,
 * exec plugins and Knative releases); SERVICE_LOG=<level> shows its log.
 */
export async function startServiceOnSandbox(
  sandbox: Sandbox,
  config: ServiceConfig,
  identity: string,
): Promise<FleetService> {
  const service = new FleetService({
    config,
    hub: loadKubeConfig(sandbox.hub.adminKubeconfig),
    providerFile: sandbox.providerFile,
    kodataDir: knativeReleasesDir(),
    identity,
    log: process.env.SERVICE_LOG ? createLogger(process.env.SERVICE_LOG) : silentLogger,
  });
  await service.start();
  return service;
}

export interface FleetProcessOptions {
  sandbox: Sandbox;
  service: TestServiceConfig;
  /** Config keys beside the test defaults (workers, sharding, ...). */
  config?: Record<string, unknown>;
  /** Logs and HOME go here; the log is `<name>.log`. */
  scratch: string;
  name: string;
  /** More environment (POD_NAME, NODE_OPTIONS, ...). */
  env?: Record<string, string>;
  /** The CLI script run (default src/cli.ts; dist/cli.js is what the image runs). */
  entry?: string;
  /** Node's own flags before the script. */
  nodeArgs?: readonly string[];
}

/** `knative-fleet run` as a real process against the sandbox's hub, with its own metrics port. */
export function startFleetProcess(options: FleetProcessOptions): ServiceProcess {
  const { sandbox, scratch, name } = options;
  const path = writeServiceConfig(options.service);
  const metricsPort = (options.config?.metricsPort as number | undefined) ?? nextMetricsPort();
  const config = parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  writeFileSync(path, stringify({ ...config, metricsPort, ...options.config }));
  return new ServiceProcess({
    args: ["run", "--config", path, "--clusterprofile-provider-file", sandbox.providerFile],
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      HOME: scratch,
      KO_DATA_PATH: knativeReleasesDir(),
      KUBECONFIG: sandbox.hub.adminKubeconfig,
      ...options.env,
    },
    metricsPort,
    logFile: join(scratch, `${name}.log`),
    ...(options.entry === undefined ? {} : { entry: options.entry }),
    ...(options.nodeArgs === undefined ? {} : { nodeArgs: options.nodeArgs }),
  });
}
