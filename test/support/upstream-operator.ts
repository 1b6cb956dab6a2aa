import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { DESIRED_HASH_ANNOTATION } from "../../src/api/labels.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import type { KubeObject } from "../../src/kube/object.ts";
import { ensureNamespace } from "./hub.ts";
import { rssKiB } from "./service-process.ts";
import { knativeReleasesDir, sharedDir } from "./shared.ts";
import { waitUntil } from "./wait.ts";

/**
 * The real upstream Knative Operator (knative/operator `cmd/operator`, unmodified, from
 * `../shared/reference/knative-operator/`) run as a child process against a sandbox hub, the way its README
 * runs it outside a cluster: its system namespace with config-logging / config-observability, the bundled
 * Knative releases as KO_DATA_PATH, and multicluster on when a provider file is given. Its JSON log goes to
 * a file that tests assert on.
 */
export const UPSTREAM_SYSTEM_NAMESPACE = "knative-operator";

export const upstreamOperatorDir = (): string => join(sharedDir(), "reference", "knative-operator");

/** The operator binary, or a clear error saying where it is expected. */
export function upstreamOperatorBinary(): string {
  const binary = join(upstreamOperatorDir(), "operator");
  if (!existsSync(binary)) {
    throw new Error(
      `the upstream Knative Operator binary is missing at ${binary}: the hand-over tests run the real operator ` +
        "(knative/operator cmd/operator at b4f2c2549cd0, built as its README there says). Put the project's " +
        "shared/ folder beside the repository or set KNATIVE_FLEET_SHARED.",
    );
  }
  return binary;
}

/**
 * What the operator needs on the hub before it starts: its system namespace and logging/observability
 * ConfigMaps. The KnativeServing/KnativeEventing CRDs are the caller's choice (ours, from the chart, serve
 * both operators: a test asserts that each accepts the other's CRs).
 */
export async function prepareUpstreamHub(hub: KubeClient): Promise<void> {
  await ensureNamespace(hub, UPSTREAM_SYSTEM_NAMESPACE);
  for (const file of ["config-logging.yaml", "config-observability.yaml"]) {
    for (const doc of parseAllDocuments(readFileSync(join(upstreamOperatorDir(), file), "utf8"))) {
      const object = doc.toJSON() as KubeObject | null;
      if (object) await hub.apply(object);
    }
  }
}

/** The upstream operator's own CRDs (`../shared/reference/knative-operator-crds/`), as parsed objects. */
export function upstreamCrds(): KubeObject[] {
  const dir = join(sharedDir(), "reference", "knative-operator-crds");
  return readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((f) =>
      parseAllDocuments(readFileSync(join(dir, f), "utf8")).map((d) => d.toJSON() as KubeObject),
    );
}

export interface UpstreamOperatorOptions {
  /** Hub kubeconfig (admin). */
  kubeconfig: string;
  /** The access-provider file; unset = multicluster off, as upstream without --clusterprofile-provider-file. */
  providerFile?: string;
  /** Where its stdout and stderr go. */
  logFile: string;
  /** --remote-deployments-poll-interval (default: upstream's 10s). */
  pollInterval?: string;
  /** Knative releases in the kodata layout (default: the shared releases). */
  kodataDir?: string;
}

/** One line of the operator's zap JSON log. */
export interface UpstreamLogLine {
  level: string;
  msg: string;
  [field: string]: unknown;
}

export class UpstreamOperator {
  readonly logFile: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #child: ChildProcess;
  #running = true;

  constructor(options: UpstreamOperatorOptions) {
    this.logFile = options.logFile;
    const log = createWriteStream(options.logFile, { flags: "a" });
    const args = [
      "--kubeconfig",
      options.kubeconfig,
      ...(options.providerFile ? ["--clusterprofile-provider-file", options.providerFile] : []),
      ...(options.pollInterval ? ["--remote-deployments-poll-interval", options.pollInterval] : []),
    ];
    this.#child = spawn(upstreamOperatorBinary(), args, {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: process.env.HOME ?? "/tmp",
        SYSTEM_NAMESPACE: UPSTREAM_SYSTEM_NAMESPACE,
        METRICS_DOMAIN: "knative.dev/operator",
        POD_NAME: "knative-operator-local",
        CONFIG_LOGGING_NAME: "config-logging",
        CONFIG_OBSERVABILITY_NAME: "config-observability",
        KO_DATA_PATH: options.kodataDir ?? knativeReleasesDir(),
        // Its profiling/metrics servers stay off the shared default ports and on loopback only.
        PROFILING_PORT: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.#child.stdout!.pipe(log, { end: false });
    this.#child.stderr!.pipe(log, { end: false });
    this.exited = new Promise((resolve) => {
      this.#child.once("exit", (code, signal) => {
        this.#running = false;
        log.end();
        resolve({ code, signal });
      });
    });
  }

  get running(): boolean {
    return this.#running;
  }

  get pid(): number {
    return this.#child.pid ?? -1;
  }

  /** Its resident set size in KiB, from /proc. */
  rssKiB(): number {
    return rssKiB(this.pid);
  }

  /** Stops it as a kubelet would: SIGTERM, SIGKILL after the grace period. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.#running) return;
    this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /**
   * Every log line so far. Its zap encoder writes `severity`/`message` (some early lines `level`/`msg`); Go's
   * own output (the registration lines, a panic) comes back with level `raw`.
   */
  lines(): UpstreamLogLine[] {
    const text = existsSync(this.logFile) ? readFileSync(this.logFile, "utf8") : "";
    return text
      .split("\n")
      .filter((line) => line.trim() !== "")
      .map((line) => {
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          const level = String(parsed.severity ?? parsed.level ?? "raw").toLowerCase();
          return { ...parsed, level, msg: String(parsed.message ?? parsed.msg ?? line) };
        } catch {
          return { level: "raw", msg: line };
        }
      });
  }

  /**
   * Error-level lines, and a Go panic or fatal exit if it printed one. The operator watches the whole shared
   * hub, so a line about a CR (its `knative.dev/key`) outside `namespaces` belongs to another test file's
   * leftovers (say a namespace still terminating) and is not counted; lines with no key always are.
   */
  errors(namespaces: readonly string[]): UpstreamLogLine[] {
    const ours = (l: UpstreamLogLine) => {
      const key = l["knative.dev/key"];
      return typeof key !== "string" || !key.includes("/") || namespaces.includes(key.split("/")[0]!);
    };
    return this.lines().filter(
      (l) =>
        ours(l) &&
        (["error", "dpanic", "panic", "fatal", "critical"].includes(l.level) ||
          (l.level === "raw" && /^(panic:|fatal error:|goroutine \d+ \[)/.test(l.msg))),
    );
  }

  /** Waits until the operator has started its controllers (or fails with its log tail if it exited). */
  async waitStarted(timeoutMs = 60_000): Promise<void> {
    await waitUntil(
      "the upstream operator to start its controllers",
      async () => {
        if (!this.#running) throw new Error(`the upstream operator exited:\n${this.tail()}`);
        return this.lines().some((l) => /Starting controllers|Starting workers/i.test(l.msg))
          ? true
          : undefined;
      },
      timeoutMs,
    );
  }

  /** Waits until the operator logs a successful reconcile of `namespace/name` (its controller's own line). */
  async waitReconciled(namespace: string, name: string, timeoutMs = 180_000): Promise<void> {
    const key = `${namespace}/${name}`;
    await waitUntil(
      `the upstream operator to reconcile ${key}`,
      async () => {
        if (!this.#running) throw new Error(`the upstream operator exited:\n${this.tail()}`);
        return this.lines().some((l) => l.msg === "Reconcile succeeded" && l["knative.dev/key"] === key)
          ? true
          : undefined;
      },
      timeoutMs,
    );
  }

  tail(lines = 30): string {
    return this.lines()
      .slice(-lines)
      .map((l) => `${l.level} ${l.msg}${l.error ? ` error=${String(l.error)}` : ""}`)
      .join("\n");
  }
}

const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * What the upstream operator sent for a live object: manifestival records it in the last-applied annotation.
 * knative-fleet writes that annotation too (so upstream's merge stays right after a hand-over); its record
 * carries knative-fleet's desired-hash annotation, upstream's never does. Undefined for anything else.
 */
export function appliedByUpstream(live: KubeObject): KubeObject | undefined {
  const text = live.metadata.annotations?.[LAST_APPLIED];
  if (!text) return undefined;
  const sent = JSON.parse(text) as KubeObject;
  return sent.metadata.annotations?.[DESIRED_HASH_ANNOTATION] === undefined ? sent : undefined;
}

type ConditionStatus = "True" | "False" | "Unknown";

/**
 * Waits until a hub CR's conditions have the given statuses (and, when given, reasons), e.g.
 * `{ Ready: "True" }` or `{ TargetClusterResolved: ["False", "ClusterProfileNotFound"] }`. Resolves with the
 * CR's status; the error names what it saw last.
 */
export async function waitConditions(
  hub: KubeClient,
  kind: string,
  namespace: string,
  name: string,
  wanted: Record<string, ConditionStatus | [ConditionStatus, string]>,
  timeoutMs = 180_000,
): Promise<{ conditions: { type: string; status: string; reason?: string; message?: string }[] }> {
  let last = "";
  try {
    return await waitUntil(
      `${kind} ${namespace}/${name} to have ${JSON.stringify(wanted)}`,
      async () => {
        const live = await hub.get("operator.knative.dev/v1beta1", kind, namespace, name);
        const status = (live?.status ?? { conditions: [] }) as {
          conditions?: { type: string; status: string; reason?: string; message?: string }[];
        };
        const conditions = status.conditions ?? [];
        last = JSON.stringify(conditions.map((c) => [c.type, c.status, c.reason, c.message?.slice(0, 200)]));
        const met = Object.entries(wanted).every(([type, want]) => {
          const [statusWanted, reason] = Array.isArray(want) ? want : [want, undefined];
          const c = conditions.find((x) => x.type === type);
          return c?.status === statusWanted && (reason === undefined || c.reason === reason);
        });
        return met ? { ...status, conditions } : undefined;
      },
      timeoutMs,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last conditions: ${last}`);
  }
}
