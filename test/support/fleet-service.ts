import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";

export interface TestServiceConfig {
  repositoryUrl: string;
  /** Hub namespace of the fleet's CRs (the fleet-example's is knative-fleet). */
  namespace?: string;
  webhookSecret?: string;
  statusInterval?: string;
  metricsPort?: number;
  leaderElection?: { leaseName: string; namespace: string };
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
    logLevel: "warn",
  };
  if (options.webhookSecret) {
    const secretFile = join(dir, "webhook-secret");
    writeFileSync(secretFile, options.webhookSecret);
    config.webhook = { port: 0, secretFile };
  }
  if (options.leaderElection) config.leaderElection = { enabled: true, ...options.leaderElection };
  const path = join(dir, "config.yaml");
  writeFileSync(path, stringify(config));
  return path;
}
