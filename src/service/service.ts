import { mkdirSync } from "node:fs";
import { clusterProfileResource } from "../access/clusterprofile-version.ts";
import { crAdmission } from "../admission/tenancy.ts";
import type { KubeClient } from "../kube/client.ts";
import type { Informer } from "../kube/informer.ts";
import { clientFromKubeConfig, type KubeConfig } from "../kube/kubeconfig.ts";
import { hubMirror } from "../mirror/mirror.ts";
import { EventRecorder } from "../observability/events.ts";
import type { Logger } from "../observability/log.ts";
import { createMetrics, type FleetMetrics } from "../observability/metrics.ts";
import { PlacementStage } from "../placement/stage.ts";
import { clusterPreflight } from "../preflight/index.ts";
import { effectivePollInterval, type Reconciler, startReconciler } from "../reconcile/start.ts";
import { createKodataSource, ReleaseLoader } from "../render/index.ts";
import { RolloutStage } from "../rollout/stage.ts";
import { checkWebhookSecret, GitSource, Poller } from "../source/index.ts";
import { StatusReports } from "../status/reports.ts";
import type { FleetSettings } from "../sync/settings.ts";
import { expandedModel } from "../sync/sync.ts";
import {
  ConfigError,
  commitStatusSettings,
  fleetSettings,
  gitSourceSpec,
  notifierSettings,
  parseDuration,
  rolloutSettings,
  type ServiceConfig,
  shardTimings,
  statusWriteBack,
} from "./config.ts";
import { type RunningHttpServer, startHttpServer } from "./http-server.ts";
import { checkHubAnswers, watchHubCrs } from "./hub.ts";
import { LeaderElector } from "./leader-election.ts";
import { listenForPushes } from "./push-listener.ts";
import { reportPollFailure, reportReconcile } from "./reports.ts";
import { loadShardKey } from "./shard-key.ts";
import { podVoucher, ShardMembership } from "./sharding.ts";
import { SyncLoop } from "./sync-loop.ts";

interface ServiceOptions {
  config: ServiceConfig;
  hub: KubeConfig;
  providerFile?: string;
  kodataDir: string;
  /** Overrides config.remoteDeploymentsPollInterval (the --remote-deployments-poll-interval flag). */
  pollIntervalMs?: number;
  /** Leader-election identity, one per process (processIdentity). */
  identity: string;
  /** The shard member's identity, bound to its Pod (`<pod name>_<pod UID>`); the leader's by default. */
  memberIdentity?: string;
  log: Logger;
  /** Called when leadership is lost: by default the process exits so it restarts clean (controller-runtime's way). */
  onLostLeadership?(): void;
}

/**
 * `knative-fleet run`: the pipeline as a service. Git source (poll + webhook) -> fleet model -> hub mirror
 * -> reconciler (hub CRs onto their spokes) -> status write-back; one leader at a time when
 * replicated; probes and metrics on one port; a clean stop on SIGTERM.
 */
export class FleetService {
  readonly metrics: FleetMetrics;
  private readonly options: ServiceOptions;
  private readonly log: Logger;
  /** The config's fleet settings, read once at start (a bad duration in them fails the start). */
  private settings!: FleetSettings;
  private http: { port: number; close(): Promise<void> } | undefined;
  private webhookServer: RunningHttpServer | undefined;
  private elector: LeaderElector | undefined;
  private reconciler: Reconciler | undefined;
  private events: EventRecorder | undefined;
  /** This replica's share of the clusters, when the reconcile is sharded. */
  private membership: ShardMembership | undefined;
  private poller: Poller | undefined;
  private statusWriter: StatusReports | undefined;
  private source: GitSource | undefined;
  /** The one hub client of the process (discovery cache and connection pool shared by every stage). */
  private hubClient: KubeClient | undefined;
  private placements: PlacementStage | undefined;
  /** The releases, parsed once for the sync's settings check and the reconcile alike. */
  private releasesLoader: ReleaseLoader | undefined;
  private rollout: RolloutStage | undefined;
  /** External mode: the hub CRs, watched so the status file follows the conditions upstream writes. */
  private hubCrWatches: Informer[] = [];
  /** The leader's syncs, one at a time, for the service's lifetime (built once the settings are read). */
  private syncs!: SyncLoop;
  private leading = false;
  private started = false;

  constructor(options: ServiceOptions) {
    this.options = options;
    this.log = options.log;
    this.metrics = createMetrics();
  }

  /** The probes-and-metrics port. */
  get port(): number | undefined {
    return this.http?.port;
  }

  /** The webhook listener's port, when a webhook is configured. */
  get webhookPort(): number | undefined {
    return this.webhookServer?.port;
  }

  get isLeading(): boolean {
    return this.leading;
  }

  async start(): Promise<void> {
    const { config } = this.options;
    // An empty or unreadable webhook secret stops the start: anyone could sign with an empty key.
    if (config.webhook) await checkWebhookSecret({ file: config.webhook.secretFile });
    const hub = clientFromKubeConfig(this.options.hub);
    this.hubClient = hub;
    this.events = new EventRecorder({ client: hub, component: "knative-fleet", log: this.options.log });
    await checkHubAnswers(hub, this.options.hub);
    mkdirSync(config.cacheDir, { recursive: true });
    this.settings = fleetSettings(config);
    this.syncs = new SyncLoop({
      settings: { fleet: this.settings, kodataDir: this.options.kodataDir },
      source: { repository: config.repository.url, branch: config.repository.branch },
      isLeading: () => this.leading,
      edges: () => ({
        hub: hubMirror(this.hubClient!, this.settings.defaultNamespace),
        placements: this.placements!,
        rollout: this.rollout!,
        releases: this.releases(),
      }),
      report: { metrics: this.metrics, log: this.log },
      onSynced: (result) => this.statusWriter?.synced(result),
    });
    this.source = new GitSource(gitSourceSpec(config), { cacheDir: config.cacheDir });
    const http = await startHttpServer({
      port: config.metricsPort,
      host: config.bindAddress,
      metrics: this.metrics,
      ready: () => this.started,
      log: this.log,
    });
    if (config.webhook)
      this.webhookServer = await listenForPushes({
        ...config.webhook,
        host: config.bindAddress,
        branch: config.repository.branch,
        filter: this.source.filter,
        onPush: () => void this.poller?.syncNow(),
        isLeading: () => this.leading,
        log: this.log,
      });
    this.http = http;
    if (config.sharding.enabled) await this.startSharded();
    if (config.leaderElection.enabled) {
      this.elector = new LeaderElector({
        client: hub,
        namespace: config.leaderElection.namespace,
        name: config.leaderElection.leaseName,
        identity: this.options.identity,
        log: this.log,
        onStartedLeading: () => this.lead(),
        onStoppedLeading: () => this.lostLeadership(),
      });
      this.elector.start();
    } else {
      await this.lead();
    }
    this.started = true;
    this.log.info(
      { port: http.port, leaderElection: config.leaderElection.enabled },
      "knative-fleet running",
    );
  }

  /** Graceful stop: no new syncs, in-flight applies finish, the status is flushed, the lease released. */
  async stop(): Promise<void> {
    this.started = false;
    await this.stopLeading();
    await this.elector?.stop();
    await this.membership?.stop();
    await this.reconciler?.stop();
    this.reconciler = undefined;
    await this.http?.close();
    await this.webhookServer?.close();
    this.log.info("knative-fleet stopped");
  }

  /** Triggers a sync now (the webhook does the same). */
  syncNow(): Promise<unknown> | undefined {
    return this.poller?.syncNow();
  }

  async flushStatus(): Promise<void> {
    await this.statusWriter?.flush();
  }

  private async lead(): Promise<void> {
    const { config, log } = this.options;
    this.leading = true;
    this.metrics.setLeader(true);
    const hub = this.hubClient!;
    const source = this.source!;
    this.statusWriter = new StatusReports({
      source,
      hub,
      writeBack: statusWriteBack(config),
      commitStatus: commitStatusSettings(config),
      notifications: notifierSettings(config),
      log,
      metrics: this.metrics,
    });
    // In external mode the upstream operator reconciles the hub CRs: no controller here, only what it writes.
    const external = this.settings.reconciler === "external";
    if (!this.membership && !external) this.reconciler = await this.startReconcile();
    if (external) this.hubCrWatches = watchHubCrs(hub, () => this.statusWriter?.request());
    const profiles = await clusterProfileResource(hub);
    this.placements = new PlacementStage({
      hub,
      allowedNamespaces: this.settings.access.namespaces,
      clusterProfileApiVersion: `${profiles.group}/${profiles.version}`,
      departureGracePeriodMs: this.settings.departureGracePeriodMs,
      log: log.child({ component: "placement" }),
      onChange: () => this.syncs.again("inventory"),
    });
    this.placements.start();
    const placements = this.placements;
    this.rollout = new RolloutStage({
      hub,
      namespace: this.settings.defaultNamespace,
      source: { repository: config.repository.url, branch: config.repository.branch },
      inventory: () => placements.inventory().clusters,
      modelAt: async (commit) => {
        const { files } = await source.snapshotAt(commit);
        return expandedModel(files, this.settings, placements.inventory()).model;
      },
      events: this.events!,
      log: log.child({ component: "rollout" }),
      ...rolloutSettings(config),
      onDue: () => this.syncs.again("rollout"),
      // Through the leader's reconciler: a sharded leader reaches its share only, an external one no spoke.
      ...(this.reconciler &&
        !this.membership && {
          preflight: clusterPreflight(hub, this.reconciler.access, this.settings.hubInstall, this.releases()),
        }),
    });
    this.poller = new Poller({
      source,
      schedule: config.pollSchedule,
      onSnapshot: (snapshot) => this.syncs.snapshot(snapshot),
      onFetched: (fetch) => this.metrics.gitFetchFinished(fetch),
      onPolled: (outcome) => this.metrics.pollFinished({ failed: outcome === "failed" }),
      onError: (err) => reportPollFailure(err, { log }),
    });
    this.poller.start();
    log.info(this.membership ? "leading: the Git side of the fleet" : "leading: reconciling the fleet");
  }

  /** The reconciler: started on becoming leader, or, sharded, at start on every replica for its share. */
  private startReconcile(): Promise<Reconciler> {
    const { config, log } = this.options;
    const { access, defaultNamespace, hubInstall, locations } = this.settings;
    const hub = this.hubClient!;
    const pollIntervalMs =
      this.options.pollIntervalMs ??
      effectivePollInterval(parseDuration(config.remoteDeploymentsPollInterval));
    return startReconciler({
      hub,
      providerFile: this.options.providerFile,
      allowedClusterProfileNamespaces: access.namespaces,
      accessPolicy: access.policy,
      admits: crAdmission(config.tenancy, defaultNamespace),
      hubInstall,
      kodataDir: this.options.kodataDir,
      manifestLocations: locations,
      releases: this.releases(),
      pollIntervalMs,
      resyncIntervalMs: parseDuration(config.resyncInterval),
      workers: config.workers,
      workersPerCluster: config.workersPerCluster,
      applyConcurrency: 8,
      fleetFilesAt: (commit) => this.source!.snapshotAt(commit),
      log,
      owns: this.membership && ((cluster) => this.membership!.owns(cluster)),
      onStatusChanged: () => this.statusWriter?.request(),
      onPluginRun: (run) => {
        if (this.owns(run.cluster)) this.metrics.execPluginFinished(run);
      },
      onClusterLeft: (cluster) => this.metrics.forgetCluster(cluster),
      onReconciled: (report) => {
        // A pass that ended after its cluster was handed on (its client closed under it) is the new owner's
        // to report: a series or event from here would show a second replica working on the cluster.
        if (!this.owns(report.cluster)) return;
        if (report.statusWritten || report.finalized) this.statusWriter?.request();
        reportReconcile(report, { metrics: this.metrics, events: this.events! });
      },
    });
  }

  /** Joins the shard membership; the reconciler reconciles only this replica's share of the clusters. */
  private async startSharded(): Promise<void> {
    const { config, log } = this.options;
    if (!config.leaderElection.enabled)
      throw new ConfigError("sharding.enabled needs leaderElection.enabled: the Git side runs on one leader");
    if (this.settings.reconciler === "external")
      throw new ConfigError("sharding needs knative-fleet's own reconciler, not reconciler: external");
    const identity = this.options.memberIdentity ?? this.options.identity;
    const { namespace } = config.leaderElection;
    const vouch = await podVoucher(this.hubClient!, namespace, identity).catch((err: Error) => {
      throw new ConfigError(err.message);
    });
    const membership = new ShardMembership({
      client: this.hubClient!,
      key: await loadShardKey(this.hubClient!, rolloutSettings(config).keyNamespace, log),
      namespace,
      group: config.leaderElection.leaseName,
      identity,
      ...shardTimings(config),
      log: log.child({ component: "sharding" }),
      onNarrowed: () => {
        this.reconciler?.releaseUnowned();
        // Its new owner reports it now; a series left here would show the cluster as it was at the hand-off.
        for (const cluster of this.metrics.reportedClusters())
          if (!membership.owns(cluster)) this.metrics.forgetCluster(cluster);
        this.observeShards();
      },
      settle: async () => {
        const controller = this.reconciler?.controller;
        if (!controller) return;
        const lost = [...controller.clusters()].filter((cluster) => !membership.owns(cluster));
        await Promise.all(lost.map((cluster) => controller.clusterSettled(cluster)));
      },
      vouch,
      onWidened: (owned) => {
        const controller = this.reconciler?.controller;
        for (const cluster of controller?.clusters() ?? [])
          if (membership.owns(cluster) && !owned(cluster)) controller!.enqueueCluster(cluster);
        this.observeShards();
      },
    });
    this.membership = membership;
    this.reconciler = await this.startReconcile();
    membership.start();
  }

  /** Whether this replica reconciles the cluster now: its shard's, or every cluster when not sharded. */
  private owns(cluster: string): boolean {
    return this.membership?.owns(cluster) ?? true;
  }

  private observeShards(): void {
    const membership = this.membership!;
    const clusters = [...(this.reconciler?.controller.clusters() ?? [])].filter((c) => membership.owns(c));
    this.metrics.shardsObserved({ members: membership.members.length, clusters: clusters.length });
  }

  private releases(): ReleaseLoader {
    this.releasesLoader ??= new ReleaseLoader(
      createKodataSource({ dir: this.options.kodataDir, policy: this.settings.locations }),
    );
    return this.releasesLoader;
  }

  private async stopLeading(): Promise<void> {
    if (!this.leading) return;
    this.leading = false;
    await this.poller?.stop();
    this.placements?.stop();
    this.rollout?.stop();
    for (const watch of this.hubCrWatches) watch.stop();
    this.hubCrWatches = [];
    await this.syncs.idle();
    if (!this.membership) {
      await this.reconciler?.stop();
      this.reconciler = undefined;
    }
    await this.statusWriter?.stop();
    this.poller = undefined;
    this.placements = undefined;
    this.rollout = undefined;
    this.syncs.forget();
    this.statusWriter = undefined;
    // Last: a poll, sync or status commit still in flight above reports as the leader it was.
    this.metrics.setLeader(false);
  }

  private async lostLeadership(): Promise<void> {
    if (this.leading && this.started) {
      // Lost, not given up: the Lease may be another replica's (leaseDuration - renewDeadline) from now, so
      // no more of the leader's work may happen here. The process ends at once instead of draining its
      // in-flight sync and status commit, which can outlast that margin (the hub unreachable), as client-go's
      // controllers do.
      this.metrics.setLeader(false);
      this.log.error("leadership lost; stopping so a fresh start rejoins the election");
      (this.options.onLostLeadership ?? (() => process.exit(1)))();
    }
    await this.stopLeading();
  }
}
