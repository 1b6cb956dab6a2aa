import type { Logger } from "pino";
import { type ClusterProfile, ClusterProfileSchema } from "../api/clusterprofile.ts";
import { TargetClusterReason } from "../api/conditions.ts";
import { formatFieldPath } from "../fleet/diagnostic.ts";
import { type ClusterRef, clusterKey } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import { KubeApiError } from "../kube/rest.ts";
import { silentLogger } from "../observability/log.ts";
import { type ClusterProfileResource, clusterProfileResource } from "./clusterprofile-version.ts";
import { ClusterProfileWatch } from "./clusterprofile-watch.ts";
import { AccessError, causeText } from "./errors.ts";
import { ExecAuthenticator, PluginRunSlots } from "./exec-authenticator.ts";
import { type AccessPolicy, SAFE_ACCESS_POLICY } from "./policy.ts";
import type { ProviderConfigState } from "./provider-config.ts";
import { SpokeConnection, type SpokeProbe } from "./spoke-connection.ts";
import { endpointFingerprint, profileHealth, type SpokeEndpoint, spokeEndpoint } from "./spoke-endpoint.ts";

export interface ClusterAccessOptions {
  /** The hub, where the ClusterProfiles are. */
  hub: KubeClient;
  providers: ProviderConfigState;
  /** Only ClusterProfiles in these namespaces are used (and watched); all namespaces when unset. */
  namespaces?: readonly string[];
  /** What a ClusterProfile may ask for beyond the safe defaults (default: nothing). */
  policy?: AccessPolicy;
  /** How long a credential plugin may run before it is killed (default 10 s). */
  pluginTimeoutMs?: number;
  /** How long before expiry a credential is renewed (default 60 s; never in its first half-life). */
  refreshBeforeExpiryMs?: number;
  /** At most this many credential plugins run at once, for every spoke together (default 4). */
  pluginsAtOnce?: number;
  /** How long the first request to a new client (GET /version) may take (default 10 s). */
  probeTimeoutMs?: number;
  logger?: Logger;
  /**
   * The sharding filter: a ClusterProfile (`namespace/name`) this replica does not reconcile now gets no
   * client, no plugin run and no probe. All are reached when unset.
   */
  owns?(cluster: string): boolean;
  /** Called after every exec plugin run, with the provider and ClusterProfile, for metrics. */
  onPluginRun?(run: { provider: string; cluster: string; durationMs: number; error: boolean }): void;
}

/** A spoke that answered: its client and what was learnt connecting to it. */
export interface SpokeClient {
  ref: ClusterRef;
  providerName: string;
  server: string;
  /** The one transport to the spoke: `connection.rest` for requests, `connection.probe` for GET /version. */
  connection: SpokeConnection;
  /** gitVersion from /version when this client first connected (undefined if /version was refused). */
  kubernetesVersion: string | undefined;
}

/** What the reconcile engine turns into the TargetClusterResolved condition. */
export type ResolveResult =
  | { ok: true; spoke: SpokeClient }
  | { ok: false; reason: TargetClusterReason; message: string };

/**
 * What changed about a watched ClusterProfile: its first sighting, how to connect (the client was replaced),
 * its health, or its deletion. A status-only change, such as a heartbeat, is not reported.
 */
export type ClusterProfileChange = "added" | "connection" | "health" | "deleted";
type ClusterProfileListener = (ref: ClusterRef, change: ClusterProfileChange) => void;

const DEFAULT_PLUGIN_TIMEOUT_MS = 10_000;
const DEFAULT_REFRESH_BEFORE_EXPIRY_MS = 60_000;
const DEFAULT_PROBE_TIMEOUT_MS = 10_000;
const DEFAULT_PLUGINS_AT_ONCE = 4;
// A ClusterProfile that changes this often while its client is being built is not settled enough to use.
const MAX_RESOLVE_ATTEMPTS = 3;

/** A watched ClusterProfile: parsed once per update, with what decides whether its client must change. */
interface SeenProfile {
  profile: ClusterProfile | AccessError;
  connection: string;
  healthy: boolean;
}

/**
 * Reaches spokes through their ClusterProfiles: resolves a reference to a ready, cached client, and (once
 * `watch()` runs) replaces a client the moment its ClusterProfile's connection details change. Without the
 * watch every resolution reads the ClusterProfile from the hub, which suits one-shot commands.
 */
export class ClusterAccess {
  readonly #options: ClusterAccessOptions;
  readonly #logger: Logger;
  readonly #entries = new Map<string, SpokeEntry>();
  readonly #seen = new Map<string, SeenProfile>();
  readonly #listeners = new Set<ClusterProfileListener>();
  /** What a contact ahead of a reconcile failed with, until the next resolution reports it. */
  readonly #contactFailures = new Map<string, AccessError>();
  #watch: ClusterProfileWatch | undefined;
  #resource: Promise<ClusterProfileResource> | undefined;
  #closed = false;
  readonly #pluginRuns: PluginRunSlots;

  constructor(options: ClusterAccessOptions) {
    this.#options = options;
    this.#pluginRuns = new PluginRunSlots(options.pluginsAtOnce ?? DEFAULT_PLUGINS_AT_ONCE);
    this.#logger = (options.logger ?? silentLogger).child({ component: "cluster-access" });
  }

  /**
   * Starts watching ClusterProfiles. Resolves after the first list (or its failure: the watch keeps retrying
   * and resolutions read from the hub meanwhile).
   */
  async watch(): Promise<void> {
    this.#checkOpen();
    if (this.#watch) return;
    this.#watch = new ClusterProfileWatch(
      this.#options.hub,
      await this.#clusterProfileResource(),
      this.#options.namespaces,
      (event) =>
        event.type === "upsert" ? this.#profileUpdated(event.object) : this.#profileDeleted(event.object),
      this.#logger,
    );
    await this.#watch.start();
  }

  /** Calls `listener` on every reported ClusterProfile change (needs `watch()`); returns the unsubscribe. */
  onClusterProfileChange(listener: ClusterProfileListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * A ready client for the spoke `ref` names: the ClusterProfile exists, is healthy, offers a configured
   * provider, the plugin returned a credential, and the spoke answered with it. The client is cached and
   * shared; concurrent resolutions of one spoke share one plugin run and one probe.
   */
  async resolve(ref: ClusterRef): Promise<ResolveResult> {
    const failed = this.#contactFailures.get(clusterKey(ref));
    if (failed) {
      this.#contactFailures.delete(clusterKey(ref));
      return { ok: false, reason: failed.reason, message: failed.message };
    }
    try {
      return { ok: true, spoke: await this.#resolve(ref) };
    } catch (err) {
      if (err instanceof AccessError) return { ok: false, reason: err.reason, message: err.message };
      throw err;
    }
  }

  /**
   * Reaches the spoke ahead of a reconcile (the work queue's preparation), so that waiting on one that does
   * not answer, a probe's whole timeout for a black-holed server, holds no worker. Undefined when its client
   * has answered already; else the resolution to start, whose failure the cluster's next `resolve` reports
   * once, at once, instead of waiting for it again. Any change to the ClusterProfile forgets the failure.
   */
  contact(ref: ClusterRef): (() => Promise<void>) | undefined {
    const key = clusterKey(ref);
    if (this.#entries.get(key)?.answered) return undefined;
    return () =>
      this.#resolve(ref).then(
        () => {
          this.#contactFailures.delete(key);
        },
        (err: unknown) => {
          if (err instanceof AccessError && !this.#closed) this.#contactFailures.set(key, err);
        },
      );
  }

  /** Stops the watch and every client; requests in flight are aborted, later resolutions fail. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const reason = accessClosed();
    const entries = [...this.#entries.values()];
    this.#entries.clear();
    this.#contactFailures.clear();
    this.#listeners.clear();
    await Promise.all([
      this.#watch?.stop(),
      ...entries.map((entry) => entry.connection.close(reason, "abort")),
    ]);
  }

  /**
   * Closes the clients of the ClusterProfiles `owns` no longer admits, aborting their requests in flight:
   * a replica that handed a cluster on sends it nothing more, even from a reconcile still running.
   */
  releaseUnowned(): void {
    const owns = this.#options.owns;
    if (!owns) return;
    for (const key of [...this.#entries.keys()]) if (!owns(key)) this.#drop(key, notOwned(key), "abort");
  }

  async #resolve(ref: ClusterRef): Promise<SpokeClient> {
    const key = clusterKey(ref);
    this.#checkOpen();
    const providers = this.#options.providers;
    if (!providers.enabled) {
      throw new AccessError(
        TargetClusterReason.MulticlusterDisabled,
        `multicluster access is off because ${providers.why}; ClusterProfile ${key} cannot be reached until a provider file is configured`,
      );
    }
    const namespaces = this.#options.namespaces;
    if (namespaces !== undefined && !namespaces.includes(ref.namespace)) {
      throw new AccessError(
        TargetClusterReason.ClusterProfileNotAllowed,
        `ClusterProfile ${key} is in namespace ${ref.namespace}, but knative-fleet only reads ClusterProfiles in ${namespaces.join(", ")} (allowedClusterProfileNamespaces)`,
      );
    }
    for (let attempt = 1; ; attempt++) {
      const profile = await this.#readProfile(ref);
      this.#checkOpen();
      if (this.#options.owns && !this.#options.owns(key))
        throw new AccessError(TargetClusterReason.RemoteClusterStale, notOwned(key));
      const health = profileHealth(profile);
      if (!health.healthy) throw new AccessError(TargetClusterReason.ClusterProfileNotReady, health.message);
      const entry = this.#entryFor(
        spokeEndpoint(profile, providers.config, {
          policy: this.#options.policy ?? SAFE_ACCESS_POLICY,
          namespaces: this.#options.namespaces,
        }),
      );
      try {
        const probe = await entry.ready(this.#options.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS);
        if (this.#entries.get(key) === entry) {
          const { endpoint } = entry.connection;
          return {
            ref,
            providerName: endpoint.providerName,
            server: endpoint.server,
            connection: entry.connection,
            kubernetesVersion: probe.kubernetesVersion,
          };
        }
      } catch (err) {
        if (this.#entries.get(key) === entry) throw err;
      }
      // The ClusterProfile changed (or access closed) while this client was being set up: start over.
      this.#checkOpen();
      if (attempt === MAX_RESOLVE_ATTEMPTS) {
        throw new AccessError(
          TargetClusterReason.RemoteClusterStale,
          `ClusterProfile ${key} changed ${attempt} times while its client was being set up; the next attempt uses its latest connection details`,
        );
      }
    }
  }

  async #readProfile(ref: ClusterRef): Promise<ClusterProfile> {
    const watched = this.#watch?.live ? this.#seen.get(clusterKey(ref)) : undefined;
    // Not watching, the watch is catching up, or a ClusterProfile created a moment ago: ask the hub.
    const profile = watched?.profile ?? parseProfile(await this.#getProfile(ref), ref);
    if (profile instanceof AccessError) throw profile;
    return profile;
  }

  /** The ClusterProfile version the hub stores, looked up once. */
  #clusterProfileResource(): Promise<ClusterProfileResource> {
    this.#resource ??= clusterProfileResource(this.#options.hub);
    return this.#resource;
  }

  async #getProfile(ref: ClusterRef): Promise<unknown> {
    const key = clusterKey(ref);
    const resource = await this.#clusterProfileResource();
    try {
      const { group, version, plural } = resource;
      const path = `/apis/${group}/${version}/namespaces/${ref.namespace}/${plural}/${ref.name}`;
      return (await this.#options.hub.rest.request({ method: "GET", path })).body;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) {
        if (err.reason === "NotFound") {
          this.#retire(key, "its ClusterProfile was deleted");
          throw new AccessError(
            TargetClusterReason.ClusterProfileNotFound,
            `ClusterProfile ${key} does not exist on the hub; check spec.clusterProfileRef or the cluster manager that registers the cluster`,
          );
        }
        throw new AccessError(
          TargetClusterReason.ClusterProfileUnavailable,
          `the hub does not serve ClusterProfiles (${resource.group}/${resource.version}); install the Cluster Inventory API CRD`,
        );
      }
      throw new AccessError(
        TargetClusterReason.ClusterProfileUnavailable,
        `cannot read ClusterProfile ${key} from the hub: ${hubErrorText(err)}`,
        { cause: err },
      );
    }
  }

  /** The cached client for this endpoint, or a new one replacing a client for older details. */
  #entryFor(endpoint: SpokeEndpoint): SpokeEntry {
    const key = clusterKey(endpoint.profile);
    const fingerprint = endpointFingerprint(endpoint);
    const existing = this.#entries.get(key);
    if (existing?.fingerprint === fingerprint) return existing;
    if (existing) this.#retire(key, "its ClusterProfile's connection details changed");
    const entry = new SpokeEntry(
      endpoint,
      fingerprint,
      new ExecAuthenticator(endpoint.plugin, endpoint.execCluster, {
        pluginTimeoutMs: this.#options.pluginTimeoutMs ?? DEFAULT_PLUGIN_TIMEOUT_MS,
        refreshBeforeExpiryMs: this.#options.refreshBeforeExpiryMs ?? DEFAULT_REFRESH_BEFORE_EXPIRY_MS,
        logger: this.#logger.child({ clusterProfile: key }),
        runs: this.#pluginRuns,
        onPluginRun: (run) =>
          this.#options.onPluginRun?.({ ...run, provider: endpoint.providerName, cluster: key }),
      }),
    );
    this.#entries.set(key, entry);
    if (endpoint.insecureSkipTlsVerify || endpoint.server.startsWith("http://")) {
      this.#logger.warn(
        {
          clusterProfile: key,
          server: endpoint.server,
          insecureSkipTlsVerify: endpoint.insecureSkipTlsVerify,
        },
        "the spoke's identity is not verified (http:// or insecure-skip-tls-verify, allowed by access.allowInsecureServers); its credential can be intercepted",
      );
    }
    this.#logger.info(
      { clusterProfile: key, accessProvider: endpoint.providerName, server: endpoint.server },
      existing ? "replacing the spoke client" : "creating a spoke client",
    );
    return entry;
  }

  /** Drops a cached client; requests already sent finish, new ones fail with RemoteClusterStale. */
  #retire(key: string, why: string): void {
    this.#drop(
      key,
      `the client for ClusterProfile ${key} was replaced because ${why}; resolve the cluster again`,
      "drain",
    );
  }

  /** Drops a cached client: later requests fail with RemoteClusterStale and `message`; see close's mode. */
  #drop(key: string, message: string, mode: "drain" | "abort"): void {
    this.#contactFailures.delete(key);
    const entry = this.#entries.get(key);
    if (entry === undefined) return;
    this.#entries.delete(key);
    const reason = new AccessError(TargetClusterReason.RemoteClusterStale, message);
    entry.connection.close(reason, mode).catch((err) => {
      this.#logger.warn({ clusterProfile: key, err: String(err) }, "closing a spoke client failed");
    });
  }

  #profileUpdated(object: KubeObject): void {
    const ref = { namespace: object.metadata?.namespace ?? "", name: object.metadata?.name ?? "" };
    const key = clusterKey(ref);
    const profile = parseProfile(object, ref);
    const seen: SeenProfile = {
      profile,
      ...connectionAndHealth(profile, this.#options),
    };
    const previous = this.#seen.get(key);
    this.#seen.set(key, seen);
    const entry = this.#entries.get(key);
    if (entry !== undefined && entry.fingerprint !== seen.connection) {
      this.#retire(key, "its ClusterProfile's connection details changed");
    }
    if (previous === undefined) this.#notify(ref, "added");
    else if (previous.connection !== seen.connection) this.#notify(ref, "connection");
    else if (previous.healthy !== seen.healthy) this.#notify(ref, "health");
  }

  #profileDeleted(object: KubeObject): void {
    const ref = { namespace: object.metadata?.namespace ?? "", name: object.metadata?.name ?? "" };
    const key = clusterKey(ref);
    this.#seen.delete(key);
    this.#retire(key, "its ClusterProfile was deleted");
    this.#notify(ref, "deleted");
  }

  #notify(ref: ClusterRef, change: ClusterProfileChange): void {
    this.#contactFailures.delete(clusterKey(ref)); // what failed may work now
    for (const listener of this.#listeners) {
      try {
        listener(ref, change);
      } catch (err) {
        this.#logger.error(
          { clusterProfile: clusterKey(ref), change, err: String(err) },
          "a ClusterProfile listener failed",
        );
      }
    }
  }

  #checkOpen(): void {
    if (this.#closed) throw accessClosed();
  }
}

/** One spoke's client and the single-flight check that it works. */
class SpokeEntry {
  readonly fingerprint: string;
  readonly connection: SpokeConnection;
  #firstProbe: Promise<SpokeProbe> | undefined;
  /** The spoke answered this client's probe: contacting it again holds nothing up. */
  answered = false;

  constructor(endpoint: SpokeEndpoint, fingerprint: string, authenticator: ExecAuthenticator) {
    this.fingerprint = fingerprint;
    this.connection = new SpokeConnection(endpoint, authenticator);
  }

  /**
   * A current credential (the plugin runs only when the cached one is due) and, once per client, a
   * successful GET /version. A failed probe is forgotten, so the next resolution probes again.
   */
  async ready(probeTimeoutMs: number): Promise<SpokeProbe> {
    await this.connection.authenticator.credential();
    this.#firstProbe ??= this.connection.probe(probeTimeoutMs).then(
      (probe) => {
        this.answered = true;
        return probe;
      },
      (err: unknown) => {
        this.#firstProbe = undefined;
        throw err;
      },
    );
    return this.#firstProbe;
  }
}

const accessClosed = (): AccessError =>
  new AccessError(
    TargetClusterReason.ClusterProviderClosed,
    "the cluster access was closed because knative-fleet is shutting down; the next run resolves the cluster again",
  );

function parseProfile(object: unknown, ref: ClusterRef): ClusterProfile | AccessError {
  const parsed = ClusterProfileSchema.safeParse(object);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map(
    (i) => `${formatFieldPath(i.path) || "(top level)"}: ${i.message}`,
  );
  return new AccessError(
    TargetClusterReason.ClusterProfileUnavailable,
    `ClusterProfile ${clusterKey(ref)} cannot be read: ${problems.join("; ")}`,
  );
}

/** What a watched ClusterProfile's client depends on, to tell a connection change from a status-only one. */
function connectionAndHealth(
  profile: ClusterProfile | AccessError,
  { providers, policy, namespaces }: ClusterAccessOptions,
): Omit<SeenProfile, "profile"> {
  if (profile instanceof AccessError) return { connection: `unreadable: ${profile.message}`, healthy: false };
  const healthy = profileHealth(profile).healthy;
  if (!providers.enabled) return { connection: "multicluster disabled", healthy };
  try {
    const endpoint = spokeEndpoint(profile, providers.config, {
      policy: policy ?? SAFE_ACCESS_POLICY,
      namespaces,
    });
    return { connection: endpointFingerprint(endpoint), healthy };
  } catch (err) {
    return { connection: `unusable: ${(err as Error).message}`, healthy };
  }
}

function hubErrorText(err: unknown): string {
  if (err instanceof KubeApiError)
    return `HTTP ${err.status}${err.serverMessage ? `: ${err.serverMessage}` : ""}`;
  return causeText(err);
}

const notOwned = (key: string): string =>
  `another replica reconciles ClusterProfile ${key} now (sharding); this one no longer reaches it`;
