import { type ChildProcess, spawn } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { join } from "node:path";
import { knativeReleasesDir, repoRoot } from "./shared.ts";

/** The whole environment of `knative-fleet run` in tests and benchmarks: this hub, the shared releases. */
export const serviceEnv = (hubKubeconfig: string, home: string): Record<string, string> => ({
  PATH: process.env.PATH ?? "/usr/bin:/bin",
  HOME: home,
  KO_DATA_PATH: knativeReleasesDir(),
  KUBECONFIG: hubKubeconfig,
});

/** How a child process ended: `code` 0 is a clean stop; `signal` is set when a signal killed it. */
/** The first metrics port this process hands out: a random base, so two test processes rarely meet. */
let nextPort = 19_000 + Math.floor(Math.random() * 900);

/**
 * A metrics port for one more `knative-fleet run` of this process: each one its own (a random port per
 * service met another now and then when a test ran five or more replicas, and that one exited at start).
 */
export const nextMetricsPort = (): number => nextPort++;

export interface ServiceExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** performance.now() when the exit was seen. */
  atMs: number;
}

export interface ServiceProcessOptions {
  /** The CLI's arguments (after `node src/cli.ts`), e.g. the Deployment's container args. */
  args: readonly string[];
  /** The whole environment of the child: nothing of the test runner's leaks in. */
  env: Record<string, string>;
  /** Port of /healthz, /readyz and /metrics on 127.0.0.1. */
  metricsPort: number;
  /** The child's stdout and stderr (pino JSON lines) go to this file. */
  logFile: string;
  /** The CLI script run (default src/cli.ts; dist/cli.js is what the image and the npm package run). */
  entry?: string;
  /** Node's own flags before the script. */
  nodeArgs?: readonly string[];
}

/**
 * `knative-fleet` as a real child process (`node src/cli.ts ...`, the image's entrypoint without the build
 * step), observed from outside the way a kubelet and Prometheus see a pod: HTTP probes, /metrics, its
 * resident memory, signals and its exit code.
 */
export class ServiceProcess {
  readonly pid: number;
  readonly logFile: string;
  /** Port of /healthz, /readyz and /metrics on 127.0.0.1 (what a scrape config names). */
  readonly metricsPort: number;
  /** Resolves when the process has exited, however it ended. */
  readonly exited: Promise<ServiceExit>;
  private readonly child: ChildProcess;
  private readonly base: string;
  private exit: ServiceExit | undefined;

  constructor(options: ServiceProcessOptions) {
    this.logFile = options.logFile;
    this.metricsPort = options.metricsPort;
    this.base = `http://127.0.0.1:${options.metricsPort}`;
    const log = createWriteStream(options.logFile, { flags: "a" });
    const entry = options.entry ?? join(repoRoot, "src", "cli.ts");
    this.child = spawn(process.execPath, [...(options.nodeArgs ?? []), entry, ...options.args], {
      cwd: repoRoot,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stdout!.pipe(log, { end: false });
    this.child.stderr!.pipe(log, { end: false });
    if (this.child.pid === undefined) throw new Error(`could not start ${process.execPath} ${entry}`);
    this.pid = this.child.pid;
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        this.exit = { code, signal, atMs: performance.now() };
        log.end();
        resolve(this.exit);
      });
    });
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** GET on the probes-and-metrics port; status 0 while nothing listens (starting, or gone). */
  async get(path: string): Promise<{ status: number; body: string }> {
    try {
      const res = await fetch(`${this.base}${path}`, { signal: AbortSignal.timeout(5_000) });
      return { status: res.status, body: await res.text() };
    } catch {
      return { status: 0, body: "" };
    }
  }

  /** Waits until /readyz answers 200; fails with the log's tail when the process exits or time runs out. */
  async ready(timeoutMs = 60_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while ((await this.get("/readyz")).status !== 200) {
      if (!this.running) throw new Error(`knative-fleet exited before it was ready:\n${this.logTail()}`);
      if (performance.now() > deadline)
        throw new Error(`knative-fleet not ready in ${timeoutMs} ms:\n${this.logTail()}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** One sample of /metrics: the series' value, or undefined when it is not exposed (or nothing answers). */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
    const { status, body } = await this.get("/metrics");
    return status === 200 ? sampleValue(body, name, labels) : undefined;
  }

  /** Resident set size in KiB, from /proc/<pid>/status. */
  rssKiB(): number {
    return rssKiB(this.pid);
  }

  /** The highest resident set size the process has had so far, in KiB. */
  peakRssKiB(): number {
    return peakRssKiB(this.pid);
  }

  /** Sends a signal to a process still running. */
  kill(signal: NodeJS.Signals): void {
    if (this.running) this.child.kill(signal);
  }

  /**
   * Stops the process for good, as a kubelet does: SIGTERM, then SIGKILL after the grace period. Resolves
   * with how it ended; for a process already gone, with how it ended then.
   */
  async stop(graceMs = 10_000): Promise<ServiceExit> {
    if (!this.running) return this.exit!;
    this.kill("SIGTERM");
    const timer = setTimeout(() => this.kill("SIGKILL"), graceMs);
    const exit = await this.exited;
    clearTimeout(timer);
    return exit;
  }

  /** The last lines of the child's log, for a failure message. */
  logTail(lines = 40): string {
    try {
      return readFileSync(this.logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "(no log)";
    }
  }
}

const CLOCK_TICKS_PER_SECOND = 100; // USER_HZ on Linux

/**
 * CPU seconds a process used (user + system, /proc/<pid>/stat), with those of its children it has waited
 * for (a controller's credential plugins) when `withChildren`.
 */
export function cpuSeconds(pid: number, withChildren = false): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]); // utime + stime
  const childTicks = withChildren ? Number(fields[13]) + Number(fields[14]) : 0; // cutime + cstime
  return (ticks + childTicks) / CLOCK_TICKS_PER_SECOND;
}

/** A process's resident set size in KiB, from /proc/<pid>/status. */
export const rssKiB = (pid: number): number => procStatusKiB(pid, "VmRSS");

/** A process's highest resident set size so far (the kernel's high-water mark, VmHWM), in KiB. */
export const peakRssKiB = (pid: number): number => procStatusKiB(pid, "VmHWM");

function procStatusKiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, "m").exec(status)?.[1];
  if (kib === undefined) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(kib);
}

/**
 * A sample's value in the Prometheus text format: the series `name` whose labels include `labels` (all of
 * them, by exact value). Undefined when there is none; an error when more than one series matches.
 */
export function sampleValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const matches = text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => {
      const close = line.lastIndexOf("}");
      const labelText = close === -1 ? "" : line.slice(name.length + 1, close);
      const series = Object.fromEntries(
        [...labelText.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]),
      );
      const value = Number(line.slice(close === -1 ? name.length : close + 1).trim());
      return { series, value };
    })
    .filter(({ series }) => Object.entries(labels).every(([k, v]) => series[k] === v));
  if (matches.length > 1)
    throw new Error(`${matches.length} series of ${name} match ${JSON.stringify(labels)}`);
  return matches[0]?.value;
}
