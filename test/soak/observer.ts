import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { OPERATOR_API_VERSION } from "../../src/api/knative.ts";
import {
  CONFIRM_PRUNE_ANNOTATION,
  CR_KIND_LABEL,
  CR_NAME_LABEL,
  DESIRED_HASH_ANNOTATION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  PRUNE_CONFIRMATION_CONFIGMAP,
  UPGRADE_TARGET_ANNOTATION,
} from "../../src/api/labels.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { Informer } from "../../src/kube/informer.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import { HELD_PRUNE_KEY, HeldPruneSchema } from "../../src/mirror/decide.ts";
import { peekRolloutState, ROLLOUT_STATE_CONFIGMAP } from "../../src/rollout/state.ts";
import { sampleValue } from "../support/service-process.ts";
import {
  clustersIn,
  DeclarationHistory,
  type Invariant,
  ownershipViolations,
  type ReplicaSample,
  type Violation,
  type WaveCr,
  waveViolation,
} from "./checks.ts";
import { contentOwner, minorOf, type SoakFleet } from "./fleet.ts";
import {
  crKey,
  expectedCrs,
  MARKER_KEY,
  maxUnavailableOf,
  protectedCrs,
  ROLLOUT_PATH,
  waveOf,
} from "./model.ts";

// What the soak watches while it runs, from outside as a platform team would: the hub CRs (every change,
// through a watch), each replica's /metrics and /proc, and the spokes' installs. Each observation is checked
// at once against the model of what was pushed; the violations go to the report with the step in progress.

/** Within this long of each other, two replicas' answers count as the same moment. */
const SAMPLE_SKEW_MS = 1_500;
/** A CR that turned unhealthy by itself this recently may have been read healthy by the rollout gate. */
const WAVE_GRACE_MS = 5_000;
/**
 * A policy, or whether the fleet wants a CR, must have been the same this long before a wave is checked
 * against it (syncs lag pushes and inventory changes).
 */
const SETTLE_MS = 30_000;

export interface ResourceSample {
  at: number;
  rssMiB: number;
  heapUsedMiB: number;
  externalMiB: number;
  fds: number;
  sockets: number;
  timers: number;
  handles: number;
  hubConnections: number;
}

export interface CrTrack {
  key: string;
  fleet: SoakFleet;
  spoke: string;
  firstSeen: number;
  hash: string | undefined;
  healthy: boolean;
  unhealthySince: number | undefined;
  changedAt: number | undefined;
  deletingSince: number | undefined;
  object: KubeObject;
}

export class Observer {
  readonly violations: Violation[] = [];
  /** Per replica process (`<replica> pid <pid>`): its resource samples. */
  readonly resources = new Map<string, ResourceSample[]>();
  /** Spoke watches open through the proxy, sampled with the resources. */
  readonly spokeWatches: { at: number; open: number }[] = [];
  readonly finalized: { key: string; seconds: number; withoutCleanup: boolean }[] = [];
  readonly counts = {
    waveChecks: 0,
    waveChecksSkipped: 0,
    ownershipSamples: 0,
    spokeSamples: 0,
    hubEvents: 0,
    /** Prunes held for a person's confirmation (maxPruneFraction) that the soak confirmed, as one would. */
    prunesConfirmed: 0,
  };
  /** CRs finalized while their ClusterProfile was gone: the spoke keeps their install by design. */
  readonly releasedWithoutCleanup = new Set<string>();
  private readonly crs = new Map<string, CrTrack>();
  private readonly declarations = new Map<SoakFleet, DeclarationHistory>();
  private readonly protectedNow = new Map<SoakFleet, Set<string>>();
  private readonly informers: Informer[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private checking = true;

  private readonly hub: KubeClient;
  private readonly fleets: readonly SoakFleet[];
  private readonly spokes: ReadonlyMap<string, KubeClient>;
  private readonly hubPort: number;
  private readonly openSpokeRequests: () => string[];
  private readonly step: () => string;

  constructor(options: {
    hub: KubeClient;
    fleets: readonly SoakFleet[];
    /** An admin client per spoke. */
    spokes: ReadonlyMap<string, KubeClient>;
    hubPort: number;
    /** The requests the spokes' proxy has open (its watches among them). */
    openSpokeRequests: () => string[];
    /** What the soak is doing now, for a violation's `step`. */
    step: () => string;
  }) {
    this.hub = options.hub;
    this.fleets = options.fleets;
    this.spokes = options.spokes;
    this.hubPort = options.hubPort;
    this.openSpokeRequests = options.openSpokeRequests;
    this.step = options.step;
    for (const fleet of this.fleets) this.declarations.set(fleet, new DeclarationHistory());
  }

  violate(invariant: Invariant, evidence: string): void {
    this.violations.push({ invariant, at: Date.now(), step: this.step(), evidence });
  }

  async start(): Promise<void> {
    for (const fleet of this.fleets) {
      this.declare(fleet, "after");
      fleet.onDeclarationChange = (when, files) => this.declare(fleet, when, files);
      for (const kind of ["KnativeServing", "KnativeEventing"]) {
        const informer = new Informer(
          this.hub,
          OPERATOR_API_VERSION,
          kind,
          undefined,
          fleet.layout.namespace,
        );
        informer.on((event, object) => void this.onHubCr(fleet, event, object));
        informer.start();
        this.informers.push(informer);
      }
    }
    await Promise.all(this.informers.map((i) => i.hasSynced()));
    this.every(2_000, () => this.sampleReplicas());
    this.every(15_000, () => this.sampleResources());
    this.every(10_000, () => this.sampleSpokes());
  }

  /** From now on deletions are the soak's own (the end of the run): no prune or wave checks. */
  stopChecking(): void {
    this.checking = false;
  }

  stop(): void {
    for (const timer of this.timers) clearInterval(timer);
    for (const informer of this.informers) informer.stop();
  }

  /**
   * Records what a fleet declares. Called `before` a push or inventory change with the keys it keeps (a key
   * leaving counts as undeclared from before the change), and `after` it with the new set.
   */
  declare(fleet: SoakFleet, when: "before" | "after", files = fleet.files): void {
    const previous = this.protectedNow.get(fleet) ?? new Set<string>();
    const keys = protectedCrs(fleet.layout, files, fleet.inventoryView, previous);
    const declared = when === "before" ? new Set([...previous].filter((k) => keys.has(k))) : keys;
    this.protectedNow.set(fleet, declared);
    this.declarations.get(fleet)!.update(declared, Date.now());
  }

  private every(ms: number, run: () => Promise<void>): void {
    let busy = false;
    this.timers.push(
      setInterval(() => {
        if (busy) return;
        busy = true;
        run()
          .catch(() => {})
          .finally(() => (busy = false));
      }, ms),
    );
  }

  // ── Hub CRs ──────────────────────────────────────────────────────────────────────────────────────────

  private async onHubCr(fleet: SoakFleet, event: string, object: KubeObject): Promise<void> {
    this.counts.hubEvents++;
    const name = object.metadata.name!;
    const key = crKey(object.kind, fleet.layout.namespace, name);
    const now = Date.now();
    const spec = object.spec as {
      version?: string;
      config?: { observability?: Record<string, string> };
      clusterProfileRef?: { name: string };
    };
    const spoke = spec.clusterProfileRef?.name ?? "";
    let track = this.crs.get(key);
    if (!track) {
      track = {
        key,
        fleet,
        spoke,
        firstSeen: now,
        hash: undefined,
        healthy: false,
        unhealthySince: now,
        changedAt: undefined,
        deletingSince: undefined,
        object,
      };
      this.crs.set(key, track);
    }
    if (event === "DELETED") {
      this.crs.delete(key);
      if (track.deletingSince === undefined) {
        track.deletingSince = now;
        this.onDeletion(track, now);
      }
      const from = track.deletingSince ?? now;
      const withoutCleanup = fleet.profileAbsentDuring(spoke, from, now);
      if (withoutCleanup) this.releasedWithoutCleanup.add(key);
      this.finalized.push({ key, seconds: (now - from) / 1000, withoutCleanup });
      return;
    }
    track.object = object;
    const version = spec.version ?? "";
    const marker = spec.config?.observability?.[MARKER_KEY];
    const upgradeTarget = object.metadata.annotations?.[UPGRADE_TARGET_ANNOTATION];
    if (!fleet.wasPushed(object.kind, name, version, marker, upgradeTarget))
      this.violate(
        "spec-from-pushed-revision",
        `hub CR ${key} holds version ${version}, marker ${marker}, which no push declared for it`,
      );
    if (object.metadata.deletionTimestamp && track.deletingSince === undefined) {
      track.deletingSince = now;
      this.onDeletion(track, now);
    }
    const before = { hash: track.hash, healthy: track.healthy };
    const healthy = isHealthy(object);
    if (healthy) track.unhealthySince = undefined;
    else track.unhealthySince ??= now;
    track.healthy = healthy;
    const hash = object.metadata.annotations?.[DESIRED_HASH_ANNOTATION];
    const changed = hash !== undefined && hash !== track.hash;
    track.hash = hash;
    if (changed) {
      track.changedAt = now;
      if (!healthy && track.unhealthySince !== undefined && track.unhealthySince < now)
        track.unhealthySince = now;
      if (this.checking) await this.checkWave(fleet, track, now, before);
    }
  }

  private onDeletion(track: CrTrack, now: number): void {
    if (!this.checking || track.deletingSince !== now) return;
    const history = this.declarations.get(track.fleet)!;
    if (!history.undeclaredDuring(track.key, track.firstSeen, now))
      this.violate(
        "no-prune-of-declared",
        `${track.key} was deleted although its file declared it the whole time since it appeared (${new Date(track.firstSeen).toISOString()})`,
      );
  }

  /** Right after a CR got new content: is its wave within maxUnavailable? */
  private async checkWave(
    fleet: SoakFleet,
    track: CrTrack,
    now: number,
    before: { hash: string | undefined; healthy: boolean },
  ): Promise<void> {
    const rollout = fleet.files.rollout;
    const recent = fleet.revisions.filter((r) => r.at >= now - SETTLE_MS);
    const settled =
      rollout !== undefined &&
      !fleet.files.broken.has(ROLLOUT_PATH) &&
      fleet.revisions.length > recent.length &&
      [fleet.revisions[fleet.revisions.length - recent.length - 1]!, ...recent].every(
        (r) =>
          JSON.stringify(r.files.rollout) === JSON.stringify(rollout) && !r.files.broken.has(ROLLOUT_PATH),
      );
    if (!settled) {
      if (rollout) this.counts.waveChecksSkipped++;
      return;
    }
    const state = peekRolloutState(
      (
        await this.hub
          .get("v1", "ConfigMap", fleet.layout.namespace, ROLLOUT_STATE_CONFIGMAP)
          .catch(() => undefined)
      )?.data as Record<string, unknown> | undefined,
    );
    if (!state) {
      this.counts.waveChecksSkipped++;
      return;
    }
    this.counts.waveChecks++;
    const declarations = this.declarations.get(fleet)!;
    const view = (t: CrTrack): WaveCr => ({
      key: t.key,
      wave: waveOf(rollout, t.spoke),
      hash: t.hash ?? "",
      baseline: state.crs[t.key]?.baseline?.hash,
      healthy: t.healthy,
      member: !declarations.undeclaredDuring(t.key, now - SETTLE_MS, now),
      unhealthySince: t.unhealthySince,
      changedAt: t.changedAt,
    });
    const letThrough: WaveCr = {
      ...view(track),
      wasUnavailable:
        before.hash !== undefined && before.hash !== state.crs[track.key]?.baseline?.hash && !before.healthy,
    };
    if (letThrough.hash === letThrough.baseline) return;
    const fleetCrs = [...this.crs.values()].filter((t) => t.fleet === fleet && t.deletingSince === undefined);
    const wave = fleetCrs.filter((t) => waveOf(rollout, t.spoke) === letThrough.wave);
    const evidence = waveViolation(
      letThrough,
      fleetCrs.map(view),
      maxUnavailableOf(rollout, wave.length),
      now,
      WAVE_GRACE_MS,
    );
    if (evidence) this.violate("waves-within-max-unavailable", evidence);
  }

  /** The CRs being deleted now, with since when. */
  deleting(): CrTrack[] {
    return [...this.crs.values()].filter((t) => t.deletingSince !== undefined);
  }

  // ── Replicas ─────────────────────────────────────────────────────────────────────────────────────────

  private async sampleReplicas(): Promise<void> {
    await Promise.all(
      this.fleets.map(async (fleet) => {
        const samples: ReplicaSample[] = [];
        await Promise.all(
          fleet.replicas.map(async (replica) => {
            const process = replica.process;
            if (!process?.running) return;
            const { status, body } = await process.get("/metrics");
            if (status !== 200) return;
            samples.push({
              replica: `${replica.name} (pid ${process.pid})`,
              at: Date.now(),
              leader: sampleValue(body, "knative_fleet_leader") === 1,
              clusters: clustersIn(body),
            });
          }),
        );
        this.counts.ownershipSamples++;
        for (const found of ownershipViolations(samples, SAMPLE_SKEW_MS))
          this.violate(found.invariant, `${fleet.repo}: ${found.evidence}`);
      }),
    );
  }

  private async sampleResources(): Promise<void> {
    this.spokeWatches.push({
      at: Date.now(),
      open: this.openSpokeRequests().filter((r) => /[?&]watch=(1|true)/.test(r)).length,
    });
    for (const fleet of this.fleets)
      for (const replica of fleet.replicas) {
        const process = replica.process;
        if (!process?.running) continue;
        const { status, body } = await process.get("/metrics");
        if (status !== 200) continue;
        try {
          const mib = (name: string, labels: Record<string, string> = {}) =>
            (sampleValue(body, name, labels) ?? 0) / 2 ** 20;
          const sample: ResourceSample = {
            at: Date.now(),
            rssMiB: process.rssKiB() / 1024,
            heapUsedMiB: mib("nodejs_heap_size_used_bytes"),
            externalMiB: mib("nodejs_external_memory_bytes"),
            timers: sampleValue(body, "nodejs_active_resources", { type: "Timeout" }) ?? 0,
            handles: sampleValue(body, "nodejs_active_handles_total") ?? 0,
            ...descriptors(process.pid, this.hubPort),
          };
          const key = `${replica.name} pid ${process.pid}`;
          this.resources.set(key, [...(this.resources.get(key) ?? []), sample]);
        } catch {
          // it exited between the scrape and /proc
        }
      }
  }

  // ── Spokes ───────────────────────────────────────────────────────────────────────────────────────────

  /** Every install's marker on the spokes must be one a push declared for its CR. */
  private async sampleSpokes(): Promise<void> {
    for (const fleet of this.fleets)
      for (const spoke of fleet.layout.spokes) {
        const client = this.spokes.get(spoke)!;
        for (const [kind, namespace, name] of [
          ["KnativeServing", "knative-serving", `serving-${spoke}`],
          ["KnativeEventing", "knative-eventing", `eventing-${spoke}`],
        ] as const) {
          const map = await withTimeout(client.get("v1", "ConfigMap", namespace, "config-observability"));
          const marker = (map?.data as Record<string, string> | undefined)?.[MARKER_KEY];
          this.counts.spokeSamples++;
          if (marker !== undefined && !fleet.wasMarkerPushed(kind, name, marker))
            this.violate(
              "spec-from-pushed-revision",
              `${spoke} runs ${namespace} with marker ${marker}, which no push declared for ${contentOwner(kind, name)}`,
            );
        }
      }
  }

  // ── A person's part ──────────────────────────────────────────────────────────────────────────────────

  /**
   * What a person does with a prune held for confirmation (more than maxPruneFraction at once, as when a
   * new leader finds two departures due together): confirms it when every CR it names is one the fleet no
   * longer declares. One naming a declared CR is left alone: it may be a record a push has just made stale
   * (the next sync replaces it, and its token releases no other set); a declared CR actually deleted is
   * what `no-prune-of-declared` counts.
   */
  async answerHeldPrune(fleet: SoakFleet): Promise<void> {
    const namespace = fleet.layout.namespace;
    const map = await withTimeout(this.hub.get("v1", "ConfigMap", namespace, PRUNE_CONFIRMATION_CONFIGMAP));
    const text = (map?.data as Record<string, string> | undefined)?.[HELD_PRUNE_KEY];
    if (map === undefined || text === undefined) return;
    const held = HeldPruneSchema.parse(JSON.parse(text));
    if (map.metadata.annotations?.[CONFIRM_PRUNE_ANNOTATION] === held.token) return;
    const previous = this.protectedNow.get(fleet) ?? new Set<string>();
    const declared = protectedCrs(fleet.layout, fleet.files, fleet.inventoryView, previous);
    if (held.candidates.some((key) => declared.has(key))) return;
    await this.hub.mergePatch("v1", "ConfigMap", namespace, PRUNE_CONFIRMATION_CONFIGMAP, {
      metadata: { annotations: { [CONFIRM_PRUNE_ANNOTATION]: held.token } },
    });
    this.counts.prunesConfirmed++;
  }

  // ── Convergence ──────────────────────────────────────────────────────────────────────────────────────

  /**
   * What keeps a fleet from being converged on its last revision: every CR the model expects on the hub with
   * its content, Ready on its generation, installed at its version, the marker on its spoke; no other CR;
   * no spoke holding the install of a CR that is gone (but those finalized while their ClusterProfile was).
   * Empty when converged.
   */
  async differences(fleet: SoakFleet): Promise<string[]> {
    if (fleet.files.broken.size > 0) return [`broken files: ${[...fleet.files.broken.keys()].join(", ")}`];
    const expected = expectedCrs(fleet.layout, fleet.files, fleet.inventoryView);
    const differences: string[] = [];
    const live = new Map(
      (await fleet.hubCrs()).map((cr) => [crKey(cr.kind, fleet.layout.namespace, cr.metadata.name!), cr]),
    );
    for (const [key, want] of expected) {
      const cr = live.get(key);
      if (!cr) {
        differences.push(`${key} is not on the hub`);
        continue;
      }
      const spec = cr.spec as { version?: string; config?: { observability?: Record<string, string> } };
      const status = cr.status as { version?: string; observedGeneration?: number } | undefined;
      if (spec.version !== want.version || spec.config?.observability?.[MARKER_KEY] !== String(want.marker))
        differences.push(
          `${key} holds ${spec.version}/${spec.config?.observability?.[MARKER_KEY]}, not ${want.version}/${want.marker}`,
        );
      else if (!isHealthy(cr))
        differences.push(`${key} is not Ready on generation ${cr.metadata.generation}: ${notReady(cr)}`);
      else if (minorOf(status?.version) !== want.version)
        differences.push(`${key} reports version ${status?.version}`);
      else {
        const namespace = want.kind === "KnativeServing" ? "knative-serving" : "knative-eventing";
        const map = await withTimeout(
          this.spokes.get(want.spoke)!.get("v1", "ConfigMap", namespace, "config-observability"),
        );
        const marker = (map?.data as Record<string, string> | undefined)?.[MARKER_KEY];
        if (marker !== String(want.marker))
          differences.push(`${want.spoke} ${namespace} has marker ${marker}, not ${want.marker}`);
      }
    }
    for (const key of live.keys())
      if (!expected.has(key)) differences.push(`${key} is on the hub, but no file declares it`);
    for (const spoke of fleet.layout.spokes)
      for (const anchor of await anchorsOn(this.spokes.get(spoke)!)) {
        const key = crKey(anchor.kind, fleet.layout.namespace, anchor.name);
        if (!live.has(key) && !this.releasedWithoutCleanup.has(key))
          differences.push(
            `${spoke} keeps the install of ${key} (anchor ${anchor.namespace}/${anchor.configMap})`,
          );
      }
    return differences;
  }
}

/** Ready=True on the CR's generation and DeploymentsAvailable=True: what the rollout gate calls healthy. */
export function isHealthy(cr: KubeObject): boolean {
  const status = cr.status as
    | { observedGeneration?: number; conditions?: { type: string; status: string }[] }
    | undefined;
  const is = (type: string) =>
    status?.conditions?.some((c) => c.type === type && c.status === "True") ?? false;
  return status?.observedGeneration === cr.metadata.generation && is("Ready") && is("DeploymentsAvailable");
}

/** The first condition that is not True, as `Type=Status Reason: message`. */
export function notReady(cr: KubeObject): string {
  const conditions =
    (
      cr.status as
        | { conditions?: { type: string; status: string; reason?: string; message?: string }[] }
        | undefined
    )?.conditions ?? [];
  const c =
    conditions.find((c) => c.status !== "True" && c.type !== "Ready") ??
    conditions.find((c) => c.status !== "True");
  return c
    ? `${c.type}=${c.status} ${c.reason ?? ""}: ${c.message ?? ""}`.slice(0, 300)
    : "no condition is False";
}

/** knative-fleet's anchors on a spoke: one per install, naming its CR. */
export async function anchorsOn(
  spoke: KubeClient,
): Promise<{ kind: string; name: string; namespace: string; configMap: string }[]> {
  const list = await withTimeout(
    spoke.list("v1", "ConfigMap", { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}` }),
  );
  return (list?.items ?? [])
    .filter((cm) => cm.metadata.name?.endsWith("-root-owner"))
    .map((cm) => ({
      kind: cm.metadata.labels?.[CR_KIND_LABEL] === "knativeeventing" ? "KnativeEventing" : "KnativeServing",
      name: cm.metadata.labels?.[CR_NAME_LABEL] ?? "",
      namespace: cm.metadata.namespace ?? "",
      configMap: cm.metadata.name ?? "",
    }));
}

/** A read of a spoke that may be frozen: undefined after `ms`, or on an error. */
export function withTimeout<T>(promise: Promise<T>, ms = 5_000): Promise<T | undefined> {
  return Promise.race([
    promise.catch(() => undefined),
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref()),
  ]);
}

/** A process's open descriptors, its sockets, and its established TCP connections to the hub's port. */
function descriptors(pid: number, hubPort: number): { fds: number; sockets: number; hubConnections: number } {
  const inodes = new Set<string>();
  const fds = readdirSync(`/proc/${pid}/fd`);
  for (const fd of fds) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  const port = hubPort.toString(16).toUpperCase().padStart(4, "0");
  let hubConnections = 0;
  for (const table of ["tcp", "tcp6"])
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[3] === "01" && f[2]!.endsWith(`:${port}`) && inodes.has(f[9]!)) hubConnections++;
    }
  return { fds: fds.length, sockets: inodes.size, hubConnections };
}
