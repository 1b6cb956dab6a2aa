import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { AccessPolicySchema, SAFE_ACCESS_POLICY } from "../access/policy.ts";
import { DEFAULT_LOCATION_POLICY, LocationPolicySchema } from "../admission/locations.ts";
import {
  DEFAULT_CLUSTER_PROFILE_NAMESPACE,
  namespaceAllowlist,
  TenancySchema,
} from "../admission/tenancy.ts";
import { type Diagnostic, formatDiagnostic } from "../fleet/diagnostic.ts";
import { durationMs } from "../fleet/duration.ts";
import { DEFAULT_NAMESPACE } from "../fleet/parse.ts";
import { validateAgainstSchema } from "../fleet/schema-diagnostics.ts";
import { DEFAULT_FILE_SELECTION } from "../fleet/select.ts";
import { parseYamlFile } from "../fleet/yaml-source.ts";
import { MirrorOptionsSchema } from "../mirror/decide.ts";
import { DEFAULT_DEPARTURE_GRACE_PERIOD } from "../placement/departures.ts";
import { DEFAULT_MAX_FETCH_BYTES, type GitAuth, type GitSourceSpec } from "../source/index.ts";
import type { CommitStatusSettings } from "../status/commit-status-writer.ts";
import { ForgeProviderSchema } from "../status/forge.ts";
import { NotificationEventSchema, NotificationFormatSchema } from "../status/notifications.ts";
import type { NotifierSettings } from "../status/notifier.ts";
import { type StatusWriteBack, statusPathProblem } from "../status/write-back.ts";
import { DEFAULT_FLEET_SETTINGS, type FleetSettings } from "../sync/settings.ts";

/**
 * The service's config file (`run --config`): the contract the Helm chart renders (charts/knative-fleet
 * README, "config.yaml"). Unknown keys are refused, so a typo is an error at start, not a silent default.
 */
const ServiceConfigSchema = z
  .strictObject({
    repository: z.strictObject({
      url: z.url({ protocol: /^https?$/ }).refine((url) => !/^[a-z]+:\/\/[^/?#]*@/i.test(url), {
        // Not a URL with a user: it would be copied into every hub CR's source-repository annotation.
        message:
          "carries credentials (user or password before @); put them in repository.credentialsDir, a " +
          "folder holding `token`, or `username` and `password` (the chart mounts fleet.repository." +
          "credentialsSecretRef there), and give the URL without them",
      }),
      branch: z.string().min(1).default("main"),
      pathGlob: z.string().min(1).default(DEFAULT_FILE_SELECTION.pathGlob),
      /** A directory holding `token`, or `username` and `password` (a mounted Secret, re-read on every use). */
      credentialsDir: z.string().min(1).optional(),
      caFile: z.string().min(1).optional(),
      /** The largest fetch from a server that cannot filter out large blobs (GitSourceSpec.maxFetchBytes). */
      maxFetchBytes: z.number().int().positive().default(DEFAULT_MAX_FETCH_BYTES),
    }),
    cacheDir: z.string().min(1).default("/var/cache/knative-fleet"),
    pollSchedule: z.string().min(1).default("* * * * *"),
    defaultNamespace: z.string().min(1).default(DEFAULT_NAMESPACE),
    status: z
      .strictObject({
        path: z.string().min(1).default("status/"),
        branch: z.string().min(1).optional(),
        authorName: z.string().min(1).default("knative-fleet"),
        authorEmail: z.string().min(1).default("knative-fleet@noreply.invalid"),
        /** At most one status commit per interval: changes in between are coalesced. */
        interval: z.string().default("30s"),
      })
      .optional(),
    /**
     * Commit statuses on the Git host (docs/commit-status.md): per cluster and for the fleet, on the commit a
     * rollout started at. Off unless set.
     */
    commitStatus: z
      .strictObject({
        provider: ForgeProviderSchema,
        /** The API's base: https://api.github.com, https://<gitea>/api/v1, https://<gitlab>/api/v4. */
        apiUrl: z.url({ protocol: /^https?$/ }),
        /** `owner/name` on the host; by default the path of repository.url without `.git`. */
        repository: z
          .string()
          .regex(/^[^/\s]+(\/[^/\s]+)+$/, "owner/name")
          .optional(),
        /** A file holding the API token (a mounted Secret, re-read on every request). */
        tokenFile: z.string().min(1),
        /** The fleet's name in the contexts (knative-fleet/<fleet>/<cluster>): one per hub that reports. */
        fleet: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,63}$/)
          .default("fleet"),
        /** Above this many clusters, only the fleet's status (with the counts) is sent. */
        maxClusters: z.number().int().min(0).max(1000).default(50),
        /** At most one round of statuses per interval. */
        interval: z.string().default("10s"),
        /** A link from every status (a dashboard, the status README). */
        targetUrl: z.url({ protocol: /^https?$/ }).optional(),
      })
      .optional(),
    /** Messages to people's webhooks on the rollout's transitions (docs/notifications.md). Off unless set. */
    notifications: z
      .strictObject({
        endpoints: z
          .array(
            z
              .strictObject({
                name: z.string().regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/),
                format: NotificationFormatSchema.default("generic"),
                url: z.url({ protocol: /^https?$/ }).optional(),
                /** A file holding the URL (Slack's and Teams' webhook URLs are secrets). */
                urlFile: z.string().min(1).optional(),
                /** A file holding the HMAC key of X-Knative-Fleet-Signature-256. */
                secretFile: z.string().min(1).optional(),
                /** Only these events; all when absent. */
                events: z.array(NotificationEventSchema).min(1).optional(),
              })
              .refine((e) => (e.url === undefined) !== (e.urlFile === undefined), {
                message: "give exactly one of url and urlFile",
              }),
          )
          .min(1),
        /** The same event about the same rollout or cluster is told at most once per interval. */
        minInterval: z.string().default("10m"),
        /** How long a cluster stays unhealthy before it is told. */
        unhealthyAfter: z.string().default("10m"),
      })
      .optional(),
    webhook: z
      // Port 0: any free port (tests; the chart always sets one).
      .strictObject({ port: z.number().int().min(0).max(65535), secretFile: z.string().min(1) })
      .optional(),
    /** Off unless set: installing Knative on the hub itself takes cluster-admin there (the chart's default too). */
    hubInstall: z.strictObject({ enabled: z.boolean().default(false) }).default({ enabled: false }),
    remoteDeploymentsPollInterval: z.string().default("10s"),
    /** How often a converged CR is checked for drift on its cluster. */
    resyncInterval: z.string().default("5m"),
    leaderElection: z
      .strictObject({
        enabled: z.boolean().default(false),
        leaseName: z.string().min(1).default("knative-fleet"),
        namespace: z.string().min(1).default("knative-fleet"),
      })
      .default({ enabled: false, leaseName: "knative-fleet", namespace: "knative-fleet" }),
    /**
     * Sharding of the reconcile over the replicas (src/service/sharding.ts): each holds a member Lease in
     * leaderElection.namespace and reconciles its share of the clusters; the Git side stays with the leader.
     */
    sharding: z
      .strictObject({
        enabled: z.boolean().default(false),
        leaseDuration: z.string().default("15s"),
        renewDeadline: z.string().default("10s"),
        retryPeriod: z.string().default("2s"),
      })
      .default({ enabled: false, leaseDuration: "15s", renewDeadline: "10s", retryPeriod: "2s" }),
    metricsPort: z.number().int().min(0).max(65535).default(9090),
    /**
     * The address the metrics and probe server and the webhook listen on: every interface by default, as a
     * Pod needs; 127.0.0.1 keeps them on loopback (a workstation, the tests).
     */
    bindAddress: z.string().min(1).default("0.0.0.0"),
    logLevel: z.enum(["trace", "debug", "info", "warn", "error"]).default("info"),
    prune: MirrorOptionsSchema.default({ prune: true, allowEmpty: false, maxPruneFraction: 0.5 }),
    workers: z.number().int().min(1).max(64).default(4),
    /**
     * At most this many workers on one spoke at once: a spoke whose requests hang holds no more, and a
     * spoke's Serving and Eventing apply one after the other (their readiness waits hold no worker).
     */
    workersPerCluster: z.number().int().min(1).max(64).default(1),

    // ── Access and tenancy (#10): which CRs are reconciled, which ClusterProfiles they may target, what a
    // ClusterProfile may ask for. Safe by default; charts/knative-fleet/README.md says how to open them.
    /** Namespaces whose ClusterProfiles CRs may target; ["*"] for every namespace. */
    allowedClusterProfileNamespaces: z
      .array(z.string().min(1))
      .min(1)
      .default([DEFAULT_CLUSTER_PROFILE_NAMESPACE]),
    tenancy: TenancySchema.default({ reconcileHandMadeCRs: false }),
    access: AccessPolicySchema.default(SAFE_ACCESS_POLICY),
    // --- Input safety (#11): which spec.manifests / spec.additionalManifests locations may be read. ---
    manifestLocations: LocationPolicySchema.default(DEFAULT_LOCATION_POLICY),
    placements: z
      .strictObject({
        /** How long a cluster may be out of a placement (ClusterProfile gone, labels changed) before its CR is pruned. */
        departureGracePeriod: z.string().default(DEFAULT_DEPARTURE_GRACE_PERIOD),
      })
      .default({ departureGracePeriod: DEFAULT_DEPARTURE_GRACE_PERIOD }),
    /**
     * Who reconciles the hub CRs onto their clusters: knative-fleet's own controller, or `external` (the
     * upstream Knative Operator, v1.22+ with multicluster on, runs on the hub): knative-fleet then mirrors,
     * gates waves, reports and prunes, and reads the conditions the upstream operator writes (docs/rollout.md).
     */
    reconciler: z.enum(["knative-fleet", "external"]).default("knative-fleet"),
    rollout: z
      .strictObject({
        /** While a wave is open, soaking or waiting for a window, how often it is checked again (docs/rollout.md). */
        checkInterval: z.string().default("5s"),
        /** The Prometheus a policy's prometheus gate queries when it names no url of its own (docs/rollout.md). */
        prometheusUrl: z.url({ protocol: /^https?$/ }).optional(),
        /**
         * The namespace of the key Secret that seals the rollout state (docs/rollout.md, "State on the hub"):
         * best one of its own, which only knative-fleet may read. Absent: `defaultNamespace`, beside the state.
         */
        keyNamespace: z
          .string()
          .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
          .max(63)
          .optional(),
      })
      .default({ checkInterval: "5s" }),
  })
  .superRefine((config, ctx) => {
    const problem = config.status && statusPathProblem(config.status.path, config.repository.pathGlob);
    if (problem) ctx.addIssue({ code: "custom", path: ["status", "path"], message: problem });
  });
export type ServiceConfig = z.infer<typeof ServiceConfigSchema>;

export class ConfigError extends Error {}

/** The settings of a config file. */
export function fleetSettings(config: ServiceConfig): FleetSettings {
  return {
    selection: { pathGlob: config.repository.pathGlob, statusDir: config.status?.path ?? DEFAULT_STATUS_DIR },
    defaultNamespace: config.defaultNamespace,
    crNamespaces: namespaceAllowlist(config.tenancy.crNamespaces ?? [config.defaultNamespace]),
    hubInstall: config.hubInstall.enabled,
    prune: config.prune,
    locations: config.manifestLocations,
    access: {
      namespaces: namespaceAllowlist(config.allowedClusterProfileNamespaces),
      policy: config.access,
    },
    departureGracePeriodMs: parseDuration(config.placements.departureGracePeriod),
    reconciler: config.reconciler,
  };
}

const DEFAULT_STATUS_DIR = DEFAULT_FILE_SELECTION.statusDir;

/** The settings of `--config FILE` for `plan` and `validate`: the service's config file, or the defaults. */
export function loadFleetSettings(path: string | undefined): {
  settings: FleetSettings;
  config?: ServiceConfig;
} {
  if (path === undefined) return { settings: DEFAULT_FLEET_SETTINGS };
  const config = loadServiceConfig(path);
  return { settings: fleetSettings(config), config };
}

/**
 * Reads and validates the config file; each error names the file, line, column and key as fleet-file errors
 * do (`config.yaml:3:3 repository.urll: unrecognized key`), from the same parser and schema diagnostics.
 */
export function loadServiceConfig(path: string): ServiceConfig {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ConfigError(`cannot read the config file ${path}: ${(err as Error).message}`);
  }
  const { documents, diagnostics } = parseYamlFile(path, text);
  if (diagnostics.length > 0) throw invalidConfig(diagnostics);
  if (documents.length > 1) {
    const [, second] = documents;
    throw invalidConfig([
      { path, ...second!.position, field: "", message: "a config file is one YAML document" },
    ]);
  }
  const [document] = documents;
  if (document === undefined) {
    throw invalidConfig([{ path, line: 1, column: 1, field: "", message: "the config file is empty" }]);
  }
  const parsed = validateAgainstSchema(path, document, document.value ?? {}, ServiceConfigSchema);
  if (parsed.success) return parsed.data;
  throw invalidConfig(parsed.diagnostics);
}

const invalidConfig = (diagnostics: readonly Diagnostic[]): ConfigError =>
  new ConfigError(`invalid config:\n  ${diagnostics.map(formatDiagnostic).join("\n  ")}`);

/** A Go duration ("10s", "1m30s", "500ms") in milliseconds. */
export function parseDuration(text: string): number {
  const ms = durationMs(text);
  if (ms === undefined) throw new ConfigError(`"${text}" is not a duration (examples: 500ms, 10s, 1m30s)`);
  return ms;
}

/** The rollout stage's settings: how often an open wave is checked, its default Prometheus, where its key is. */
export function rolloutSettings(config: ServiceConfig): {
  checkIntervalMs: number;
  keyNamespace: string;
  prometheusUrl?: string;
} {
  const { checkInterval, prometheusUrl, keyNamespace = config.defaultNamespace } = config.rollout;
  return {
    checkIntervalMs: parseDuration(checkInterval),
    keyNamespace,
    ...(prometheusUrl && { prometheusUrl }),
  };
}

/** The status write-back of the config (`status`), when it has one: where, by whom and how often it commits. */
export function statusWriteBack(config: ServiceConfig): StatusWriteBack | undefined {
  const { status } = config;
  if (!status) return undefined;
  return {
    path: status.path,
    branch: status.branch ?? config.repository.branch,
    author: { name: status.authorName, email: status.authorEmail },
    intervalMs: parseDuration(status.interval),
  };
}

/** The notifications of the config (`notifications`), when it has them. */
export function notifierSettings(config: ServiceConfig): NotifierSettings | undefined {
  const { notifications } = config;
  if (!notifications) return undefined;
  const read = (file: string) => () => readFileSync(file, "utf8").trim();
  return {
    endpoints: notifications.endpoints.map(({ name, format, url, urlFile, secretFile, events }) => ({
      name,
      format,
      url: url !== undefined ? () => url : read(urlFile!),
      ...(secretFile !== undefined && { secret: read(secretFile) }),
      ...(events !== undefined && { events: new Set(events) }),
    })),
    fleet: config.commitStatus?.fleet ?? "fleet",
    minIntervalMs: parseDuration(notifications.minInterval),
    unhealthyAfterMs: parseDuration(notifications.unhealthyAfter),
  };
}

/** The commit statuses of the config (`commitStatus`), when it has them. */
export function commitStatusSettings(config: ServiceConfig): CommitStatusSettings | undefined {
  const { commitStatus } = config;
  if (!commitStatus) return undefined;
  const { provider, apiUrl, tokenFile, fleet, maxClusters, interval, targetUrl } = commitStatus;
  const repository =
    commitStatus.repository ?? new URL(config.repository.url).pathname.replace(/^\/+|\.git$|\/+$/g, "");
  return {
    forge: {
      provider,
      apiUrl,
      repository,
      token: () => readFileSync(tokenFile, "utf8").trim(),
      targetUrl,
    },
    statuses: { fleet, maxClusters },
    intervalMs: parseDuration(interval),
  };
}

/** The shard membership's Lease timings of the config (`sharding`), in milliseconds. */
export function shardTimings(config: ServiceConfig): {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
} {
  const { sharding } = config;
  return {
    leaseDurationMs: parseDuration(sharding.leaseDuration),
    renewDeadlineMs: parseDuration(sharding.renewDeadline),
    retryPeriodMs: parseDuration(sharding.retryPeriod),
  };
}

/** The Git source of the config: credentials from the mounted directory, read again on every use. */
export function gitSourceSpec(config: ServiceConfig): GitSourceSpec {
  const { repository } = config;
  return {
    url: repository.url,
    branch: repository.branch,
    ...fleetSettings(config).selection,
    timeoutMs: 60_000,
    maxFetchBytes: repository.maxFetchBytes,
    ...(repository.caFile ? { caFile: repository.caFile } : {}),
    ...(repository.credentialsDir ? { auth: gitAuthFrom(repository.credentialsDir) } : {}),
  };
}

function gitAuthFrom(dir: string): GitAuth {
  if (existsSync(join(dir, "token"))) {
    // GitHub and GitLab take a token as the basic-auth password; the user name is not checked.
    return { type: "basic", username: "knative-fleet", password: { file: join(dir, "token") } };
  }
  if (existsSync(join(dir, "username")) && existsSync(join(dir, "password"))) {
    const username = readFileSync(join(dir, "username"), "utf8").trim();
    return { type: "basic", username, password: { file: join(dir, "password") } };
  }
  throw new ConfigError(
    `repository.credentialsDir ${dir} holds neither "token" nor "username" and "password"`,
  );
}
