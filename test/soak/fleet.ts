import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import { freePort } from "../sandbox/processes.ts";
import type { Sandbox } from "../sandbox/sandbox.ts";
import { startFleetProcess } from "../support/fleet-service.ts";
import type { GitServer } from "../support/git-server.ts";
import { copyClusterProfile, ensureNamespace, replicaPod } from "../support/hub.ts";
import { type LoopbackProxy, startFreezableForwarder } from "../support/loopback-proxies.ts";
import type { ServiceProcess } from "../support/service-process.ts";
import {
  changedTexts,
  EVENTING_LABEL,
  type FleetFiles,
  type FleetLayout,
  type Inventory,
  KNATIVE_MINORS,
  PLACEMENT_NAME,
  type Push,
  RING_LABEL,
  renderFiles,
  ringOf,
  type SpokeProfile,
} from "./model.ts";

// One fleet under soak: its hub namespaces and ClusterProfiles (copies of the sandbox's, behind the soak's
// counting proxy), its repository on the soak's git server (with an `update` hook that logs every branch
// update), and its replicas of `knative-fleet run` as the image runs them, restarted whenever they exit (as
// a kubelet restarts a container). It keeps the model of what was pushed and how the inventory was changed.

export type FleetMode = "leader" | "sharding";
const PROFILES_API = "multicluster.x-k8s.io/v1alpha1";
export const BOT_AUTHOR = "knative-fleet";

/** How a replica's process is started: the CLI script, Node's flags and the image's environment. */
export interface ProcessRuntime {
  entry: string;
  nodeArgs: readonly string[];
  env: Record<string, string>;
}

/** What every fleet shares: the sandbox, the hub, the git server, the proxy in front of the spokes. */
export interface SoakContext {
  sandbox: Sandbox;
  hub: KubeClient;
  git: GitServer;
  /** The spokes' proxy (`<url>/<spoke>`) and the CA its certificate is signed by (base64 PEM). */
  proxy: { url: string; caData: string };
  runtime: ProcessRuntime;
  workDir: string;
  log: (line: string) => void;
}

/** A replica slot (a pod): its process comes and goes; its name (POD_NAME) stays. */
export interface Replica {
  name: string;
  /** Never killed by a fault, so one process of the run lives from start to end (resource slopes). */
  longRunner: boolean;
  process: ServiceProcess | undefined;
  /** Its Pod's UID, which its identity carries (POD_UID, as the chart sets it). */
  podUid?: string;
  /** Every process it ran, with how it ended. */
  instances: {
    pid: number;
    startedAt: number;
    endedAt?: number;
    exit?: string;
    killedByFault?: boolean;
    /** Stopped by the soak at its end (SIGTERM, as a kubelet stops a pod). */
    stoppedAtEnd?: boolean;
  }[];
  webhookPort: number;
  /** Its path to the hub, which a fault can partition; set up with the first process. */
  hubPath: (LoopbackProxy & { freeze(): void; thaw(): void }) | undefined;
}

export class SoakFleet {
  readonly id: string;
  readonly mode: FleetMode;
  readonly layout: FleetLayout;
  readonly repo: string;
  readonly replicas: Replica[];
  files: FleetFiles;
  readonly inventory = new Map<string, SpokeProfile>();
  /** Every revision pushed, oldest first (the initial one too). */
  readonly revisions: { commit: string; at: number; message: string; kind: string; files: FleetFiles }[] = [];
  /** Every content any push declared, as `<cr name or placement>|<version>|<marker>`. */
  readonly pushedContents = new Set<string>();
  readonly webhookSecret = `soak-webhook-${Math.random().toString(36).slice(2)}`;
  /** Per spoke, when its ClusterProfile was deleted and re-created (Date.now()). */
  readonly profileAbsences = new Map<string, { from: number; to?: number }[]>();
  private readonly context: SoakContext;
  private readonly dir: string;
  private readonly credentialsNamespace: string;
  /**
   * Told before a push or an inventory change (with the files it will hold; the inventory is already the
   * new one) and after it: what the fleet declares changes there (the observer's DeclarationHistory).
   */
  onDeclarationChange: (when: "before" | "after", files: FleetFiles) => void = () => {};
  private stopping = false;
  private markerCount = 0;
  private profileStatus = new Map<string, Record<string, unknown>>();

  constructor(
    context: SoakContext,
    setup: { id: string; mode: FleetMode; replicas: number; spokes: string[] },
  ) {
    this.context = context;
    this.id = setup.id;
    this.mode = setup.mode;
    this.repo = `soak-${setup.id}`;
    this.layout = {
      namespace: `soak-${setup.id}`,
      profileNamespace: `soak-${setup.id}-clusters`,
      spokes: setup.spokes,
    };
    this.credentialsNamespace = `soak-${setup.id}-credentials`;
    this.dir = join(context.workDir, this.repo);
    mkdirSync(this.dir, { recursive: true });
    this.replicas = Array.from({ length: setup.replicas }, (_, i) => ({
      name: `${this.repo}-${i + 1}`,
      // In sharding mode the first replica is never killed; in leader mode every kill takes the leader.
      longRunner: setup.mode === "sharding" && i === 0,
      process: undefined,
      instances: [],
      webhookPort: 0,
      hubPath: undefined,
    }));
    const version = "1.22";
    this.files = {
      serving: new Map(setup.spokes.map((s) => [s, { version, marker: this.marker() }])),
      placement: {
        version,
        marker: this.marker(),
        rings: [...new Set(setup.spokes.map((s) => ringOf(this.layout, s)))],
      },
      rollout: undefined,
      broken: new Map(),
    };
    for (const spoke of setup.spokes)
      this.inventory.set(spoke, {
        exists: true,
        eventing: true,
        ring: ringOf(this.layout, spoke),
        healthy: true,
      });
  }

  /** A marker never used before in this fleet. */
  marker(): number {
    return ++this.markerCount;
  }

  get logFiles(): string[] {
    return this.replicas.map((r) => join(this.dir, `${r.name}.log`));
  }

  get hookLog(): string {
    return join(this.dir, "ref-updates.log");
  }

  get slowPluginFile(): string {
    return join(this.dir, "plugin-delay-seconds");
  }

  get pluginRunsFile(): string {
    return join(this.dir, "plugin-runs.log");
  }

  /** Namespaces, ClusterProfiles, credentials, the repository with its first revision, the replicas. */
  async setUp(): Promise<void> {
    const { hub, sandbox, git, proxy } = this.context;
    for (const ns of [this.layout.namespace, this.layout.profileNamespace]) await ensureNamespace(hub, ns);
    for (const spoke of this.layout.spokes) {
      await copyClusterProfile(
        hub,
        { namespace: sandbox.clusterProfileNamespace, name: spoke },
        this.layout.profileNamespace,
        { url: `${proxy.url}/${spoke}`, caData: proxy.caData },
        this.credentialsNamespace,
      );
      await this.writeLabels(spoke);
      const live = await hub.get(PROFILES_API, "ClusterProfile", this.layout.profileNamespace, spoke);
      this.profileStatus.set(spoke, live!.status as Record<string, unknown>);
    }
    if (this.mode === "sharding") {
      // What the chart's Deployment gives each replica: a Pod named POD_NAME, running as its ServiceAccount.
      await hub.apply({
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "knative-fleet", namespace: this.layout.namespace },
      });
      for (const replica of this.replicas) {
        const pod = await replicaPod(hub, this.layout.namespace, replica.name);
        replica.podUid = String(pod.metadata.uid);
      }
    }
    const texts = renderFiles(this.layout, this.files);
    const initial = await git.createRepo(this.repo, Object.fromEntries(texts));
    this.recordContents(this.files);
    this.revisions.push({
      commit: initial,
      at: Date.now(),
      message: "the fleet",
      kind: "initial",
      files: this.files,
    });
    // Every update of the branch, as the server sees it: a force push cannot hide.
    writeFileSync(this.hookLog, `${"0".repeat(40)} ${initial} ff\n`);
    const hook = join(git.repoPath(this.repo), "hooks", "update");
    writeFileSync(
      hook,
      [
        "#!/bin/sh",
        `if [ "$2" = ${"0".repeat(40)} ] || git merge-base --is-ancestor "$2" "$3"; then how=ff; else how=forced; fi`,
        `echo "$2 $3 $how" >> ${this.hookLog}`,
        "",
      ].join("\n"),
    );
    chmodSync(hook, 0o755);
    writeFileSync(join(this.dir, "webhook-secret"), this.webhookSecret);
    this.writeProviderFile();
    for (const replica of this.replicas) await this.startReplica(replica);
  }

  /** Pushes a change as a person does; the model moves on only once the push is in. */
  async push(push: Push): Promise<string> {
    const before = renderFiles(this.layout, this.files);
    const after = renderFiles(this.layout, push.files);
    this.recordContents(push.files);
    this.onDeclarationChange("before", push.files);
    const commit = await this.context.git.pushChange(this.repo, {
      message: push.message,
      files: changedTexts(before, after),
    });
    this.files = push.files;
    this.onDeclarationChange("after", this.files);
    this.revisions.push({
      commit,
      at: Date.now(),
      message: push.message,
      kind: push.kind,
      files: push.files,
    });
    return commit;
  }

  /**
   * Whether a CR content (version, marker) was ever pushed for the CR named `name`; or, when the CR names
   * the version its file wants (`upgradeTarget`: a hub CR on a step of an upgrade chain, docs/rollout.md),
   * whether it is such a step: that version was pushed with this marker, and `version` is a minor below it,
   * at or above the oldest version pushed for the CR (a chain walks up from where the CR was, one minor at
   * a time, with the rest of the content its file has).
   */
  wasPushed(
    kind: string,
    name: string,
    version: string,
    marker: string | undefined,
    upgradeTarget?: string,
  ): boolean {
    const owner = contentOwner(kind, name);
    if (this.pushedContents.has(`${owner}|${version}|${marker}`)) return true;
    const target = minorOf(upgradeTarget);
    const step = minorOf(version);
    if (
      target === undefined ||
      step === undefined ||
      !this.pushedContents.has(`${owner}|${target}|${marker}`)
    )
      return false;
    const rank = (minor: string) => KNATIVE_MINORS.indexOf(minor as (typeof KNATIVE_MINORS)[number]);
    const oldest = Math.min(
      ...[...this.pushedContents]
        .map((content) => content.split("|"))
        .filter(([who]) => who === owner)
        .map(([, pushed]) => rank(minorOf(pushed) ?? target)),
    );
    return rank(step) < rank(target) && rank(step) >= oldest;
  }

  /** Whether a marker was ever pushed for the CR named `name`, with any version. */
  wasMarkerPushed(kind: string, name: string, marker: string): boolean {
    return KNATIVE_MINORS.some((version) => this.wasPushed(kind, name, version, marker));
  }

  /** Whether the spoke's ClusterProfile was gone at some moment of [from, to]. */
  profileAbsentDuring(spoke: string, from: number, to: number): boolean {
    return (this.profileAbsences.get(spoke) ?? []).some((a) => a.from <= to && (a.to ?? Infinity) >= from);
  }

  private recordContents(files: FleetFiles): void {
    for (const [spoke, c] of files.serving)
      this.pushedContents.add(`serving-${spoke}|${c.version}|${c.marker}`);
    if (files.placement)
      this.pushedContents.add(`${PLACEMENT_NAME}|${files.placement.version}|${files.placement.marker}`);
  }

  // ── The inventory ────────────────────────────────────────────────────────────────────────────────────

  async relabel(spoke: string): Promise<void> {
    const profile = this.inventory.get(spoke)!;
    this.inventory.set(spoke, { ...profile, eventing: !profile.eventing });
    this.onDeclarationChange("before", this.files);
    if (profile.exists) await this.retry(`relabel ${spoke}`, () => this.writeLabels(spoke));
    this.onDeclarationChange("after", this.files);
  }

  async setHealthy(spoke: string, healthy: boolean): Promise<void> {
    const profile = this.inventory.get(spoke)!;
    this.inventory.set(spoke, { ...profile, healthy });
    if (profile.exists) await this.retry(`${spoke}'s health`, () => this.writeStatus(spoke));
  }

  async deleteProfile(spoke: string): Promise<void> {
    this.inventory.set(spoke, { ...this.inventory.get(spoke)!, exists: false });
    this.profileAbsences.set(spoke, [...(this.profileAbsences.get(spoke) ?? []), { from: Date.now() }]);
    this.onDeclarationChange("before", this.files);
    await this.retry(`delete ${spoke}'s ClusterProfile`, () =>
      this.context.hub.delete(PROFILES_API, "ClusterProfile", this.layout.profileNamespace, spoke),
    );
    this.onDeclarationChange("after", this.files);
  }

  async recreateProfile(spoke: string): Promise<void> {
    const { hub, sandbox, proxy } = this.context;
    await this.retry(`re-create ${spoke}'s ClusterProfile`, async () => {
      await copyClusterProfile(
        hub,
        { namespace: sandbox.clusterProfileNamespace, name: spoke },
        this.layout.profileNamespace,
        { url: `${proxy.url}/${spoke}`, caData: proxy.caData },
      );
      await this.writeLabels(spoke);
      await this.writeStatus(spoke);
    });
    this.inventory.set(spoke, { ...this.inventory.get(spoke)!, exists: true });
    const absence = this.profileAbsences.get(spoke)?.at(-1);
    if (absence) absence.to = Date.now();
    this.onDeclarationChange("after", this.files);
  }

  get inventoryView(): Inventory {
    return this.inventory;
  }

  /** A hub write of the soak's own, retried while the hub restarts (a fault may be in progress). */
  private async retry<T>(what: string, write: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + 180_000;
    for (;;) {
      try {
        return await write();
      } catch (err) {
        if (Date.now() > deadline) throw new Error(`${what}: ${(err as Error).message}`);
        await sleep(1_000);
      }
    }
  }

  private async writeLabels(spoke: string): Promise<void> {
    const profile = this.inventory.get(spoke)!;
    await this.context.hub.mergePatch(PROFILES_API, "ClusterProfile", this.layout.profileNamespace, spoke, {
      metadata: {
        labels: { [EVENTING_LABEL]: profile.eventing ? "enabled" : "disabled", [RING_LABEL]: profile.ring },
      },
    });
  }

  private async writeStatus(spoke: string): Promise<void> {
    const status = this.profileStatus.get(spoke)!;
    const healthy = this.inventory.get(spoke)!.healthy;
    await this.context.hub.apply(
      {
        apiVersion: PROFILES_API,
        kind: "ClusterProfile",
        metadata: { name: spoke, namespace: this.layout.profileNamespace },
        status: {
          ...status,
          conditions: [
            {
              type: "ControlPlaneHealthy",
              status: healthy ? "True" : "False",
              reason: healthy ? "Healthy" : "SoakHealthFlip",
              message: healthy
                ? "the soak reports the spoke healthy"
                : "the soak reports the spoke unhealthy",
              lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
            },
          ],
        },
      } as KubeObject,
      { subresource: "status" },
    );
  }

  // ── Replicas ─────────────────────────────────────────────────────────────────────────────────────────

  /** The provider file with the secretreader plugin behind a wrapper that can be made slow, and logs runs. */
  private writeProviderFile(): void {
    const config = JSON.parse(readFileSync(this.context.sandbox.providerFile, "utf8")) as {
      providers: { name: string; execConfig: { command: string } }[];
    };
    for (const provider of config.providers) {
      const wrapper = join(this.dir, `${provider.name}-plugin.sh`);
      writeFileSync(
        wrapper,
        [
          "#!/bin/sh",
          "# The soak's slow exec plugin: waits the seconds in the delay file (when there is one), then runs the real plugin.",
          `delay=$(/bin/cat ${this.slowPluginFile} 2>/dev/null)`,
          `echo "$(/bin/date +%s) ${provider.name} delay=\${delay:-0}" >> ${this.pluginRunsFile}`,
          `[ -n "$delay" ] && /bin/sleep "$delay"`,
          `exec ${provider.execConfig.command} "$@"`,
          "",
        ].join("\n"),
      );
      chmodSync(wrapper, 0o755);
      provider.execConfig.command = wrapper;
    }
    writeFileSync(join(this.dir, "provider-config.json"), JSON.stringify(config, null, 2));
  }

  /** Starts a replica's process; when it exits (a kill, a crash, leadership lost) it is started again. */
  async startReplica(replica: Replica): Promise<void> {
    const { sandbox, git, runtime } = this.context;
    replica.webhookPort = await freePort();
    const metricsPort = await freePort();
    const hubKubeconfig = join(this.dir, `${replica.name}-hub.kubeconfig`);
    if (!replica.hubPath) {
      const hubUrl = new URL(sandbox.hub.server);
      replica.hubPath = await startFreezableForwarder({ host: hubUrl.hostname, port: Number(hubUrl.port) });
      writeFileSync(
        hubKubeconfig,
        readFileSync(sandbox.hub.adminKubeconfig, "utf8").replace(sandbox.hub.server, replica.hubPath.url),
      );
    }
    const process = startFleetProcess({
      sandbox: {
        ...sandbox,
        hub: { ...sandbox.hub, adminKubeconfig: hubKubeconfig },
        providerFile: join(this.dir, "provider-config.json"),
      },
      service: {
        repositoryUrl: git.url(this.repo),
        namespace: this.layout.namespace,
        statusInterval: "5s",
        leaderElection: { leaseName: "knative-fleet", namespace: this.layout.namespace },
      },
      config: {
        metricsPort,
        logLevel: "info",
        workers: 4,
        remoteDeploymentsPollInterval: "2s",
        sharding: { enabled: this.mode === "sharding" },
        webhook: { port: replica.webhookPort, secretFile: join(this.dir, "webhook-secret") },
        allowedClusterProfileNamespaces: [this.layout.profileNamespace],
        access: { credentialNamespaces: { [this.layout.profileNamespace]: this.credentialsNamespace } },
        placements: { departureGracePeriod: "20s" },
        rollout: { checkInterval: "2s" },
      },
      scratch: this.dir,
      name: replica.name,
      env: { ...runtime.env, POD_NAME: replica.name, ...(replica.podUid && { POD_UID: replica.podUid }) },
      entry: runtime.entry,
      nodeArgs: runtime.nodeArgs,
    });
    replica.process = process;
    const instance: Replica["instances"][number] = { pid: process.pid, startedAt: Date.now() };
    replica.instances.push(instance);
    void process.exited.then(async (exit) => {
      instance.endedAt = Date.now();
      instance.exit = exit.signal ?? `exit ${exit.code}`;
      if (this.stopping) return;
      if (!instance.killedByFault)
        this.context.log(
          `${replica.name} (pid ${process.pid}) ended by itself (${instance.exit}); restarting it`,
        );
      await sleep(2_000); // a kubelet's first restart back-off is 10 s; shorter keeps the soak dense
      if (!this.stopping) await this.startReplica(replica);
    });
  }

  /** SIGKILL, as a node losing power or the OOM killer does; the supervisor starts it again. */
  kill(replica: Replica): number | undefined {
    const process = replica.process;
    if (!process?.running) return undefined;
    replica.instances.at(-1)!.killedByFault = true;
    process.kill("SIGKILL");
    return process.pid;
  }

  /** The replica whose /metrics says it leads, if one does. */
  async leader(): Promise<Replica | undefined> {
    for (const replica of this.replicas)
      if ((await replica.process?.metric("knative_fleet_leader")) === 1) return replica;
    return undefined;
  }

  /**
   * Points a spoke's ClusterProfile at the proxy's other route to it (`/<spoke>` <-> `/<spoke>-alt`): a
   * changed server, as when a cluster manager moves an endpoint, so the spoke's client is built anew and its
   * credential plugin runs again.
   */
  async repointProfile(spoke: string): Promise<string> {
    const status = this.profileStatus.get(spoke)!;
    const providers = status.accessProviders as { cluster: { server: string } }[];
    const server = providers[0]!.cluster.server;
    const next = server.endsWith("-alt") ? server.slice(0, -"-alt".length) : `${server}-alt`;
    this.profileStatus.set(spoke, {
      ...status,
      accessProviders: providers.map((p) => ({ ...p, cluster: { ...p.cluster, server: next } })),
    });
    if (this.inventory.get(spoke)!.exists)
      await this.retry(`re-point ${spoke}`, () => this.writeStatus(spoke));
    return next;
  }

  async stopReplicas(): Promise<void> {
    this.stopping = true;
    for (const replica of this.replicas) replica.hubPath?.thaw();
    for (const replica of this.replicas) {
      const last = replica.instances.at(-1);
      if (last && last.endedAt === undefined) last.stoppedAtEnd = true;
    }
    await Promise.all(this.replicas.map((r) => r.process?.stop()));
    await Promise.all(this.replicas.map((r) => r.hubPath?.close()));
  }

  // ── Cleanup ──────────────────────────────────────────────────────────────────────────────────────────

  /** The fleet's hub CRs (both kinds), as they are now. */
  async hubCrs(): Promise<KubeObject[]> {
    const lists = await Promise.all(
      ["KnativeServing", "KnativeEventing"].map((kind) =>
        this.context.hub.list(OPERATOR_API_VERSION, kind, { namespace: this.layout.namespace }),
      ),
    );
    return lists.flatMap((l) => l.items);
  }

  /** Drops what is left on the hub (finalizers too: no reconciler runs any more). */
  async removeFromHub(): Promise<void> {
    const { hub } = this.context;
    for (const cr of await this.hubCrs().catch(() => [])) {
      await hub
        .mergePatch(OPERATOR_API_VERSION, cr.kind, cr.metadata.namespace, cr.metadata.name!, {
          metadata: { finalizers: null },
        })
        .catch(() => {});
      await hub
        .delete(OPERATOR_API_VERSION, cr.kind, cr.metadata.namespace, cr.metadata.name!)
        .catch(() => {});
    }
    for (const ns of [this.layout.namespace, this.layout.profileNamespace, this.credentialsNamespace])
      await hub.delete("v1", "Namespace", undefined, ns).catch(() => {});
  }
}

/** Whose content a CR holds: its own file's (serving-<spoke>), or the placement's (for every cluster). */
export const contentOwner = (kind: string, name: string): string =>
  kind === "KnativeEventing" ? PLACEMENT_NAME : name;

/** The Knative minor of a release or minor (`1.22.1` -> `1.22`), if it is one the fleet ships. */
export function minorOf(version: string | undefined): string | undefined {
  const minor = /^v?(\d+\.\d+)/.exec(version ?? "")?.[1];
  return KNATIVE_MINORS.find((m) => m === minor);
}
