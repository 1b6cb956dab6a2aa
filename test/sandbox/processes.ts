import { spawn } from "node:child_process";
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { setPriority } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Sandbox servers run detached in their own process group, so `sandbox up` can return while they run.
 * Each writes `pids/<name>.json` ({pid, marker}); `stopAll` stops exactly those processes and checks the
 * marker (the state dir) in /proc/<pid>/cmdline first, so a pid reused after a crash is never killed.
 */
export interface ManagedProcess {
  name: string;
  pid: number;
  /**
   * Whether this start has exited, from the child's own exit event: its /proc cmdline says nothing until the
   * child has exec'd (a wrapper such as setpriv execs twice), so a marker check right after the spawn would
   * take a starting process for a dead one.
   */
  exited(): boolean;
}

export function startProcess(stateDir: string, name: string, binary: string, args: string[]): ManagedProcess {
  const logDir = join(stateDir, "logs");
  const pidDir = join(stateDir, "pids");
  mkdirSync(logDir, { recursive: true });
  mkdirSync(pidDir, { recursive: true });
  const log = openSync(join(logDir, `${name}.log`), "a");
  const child = spawn(binary, args, { detached: true, stdio: ["ignore", log, log] });
  if (child.pid === undefined) throw new Error(`sandbox: could not start ${name} (${binary})`);
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  child.unref();
  writeFileSync(join(pidDir, `${name}.json`), JSON.stringify({ pid: child.pid, marker: stateDir }));
  return { name, pid: child.pid, exited: () => exited };
}

function isOurs(pid: number, marker: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(marker);
  } catch {
    return false;
  }
}

export function isRunning(stateDir: string, name: string): boolean {
  const file = join(stateDir, "pids", `${name}.json`);
  if (!existsSync(file)) return false;
  const { pid, marker } = JSON.parse(readFileSync(file, "utf8")) as { pid: number; marker: string };
  return isOurs(pid, marker);
}

/**
 * Stops every process this state dir started (or only those `only` names); returns the names stopped.
 * Safe to call repeatedly.
 */
export async function stopAll(stateDir: string, only?: readonly string[]): Promise<string[]> {
  const pidDir = join(stateDir, "pids");
  if (!existsSync(pidDir)) return [];
  const live: { name: string; pid: number; file: string }[] = [];
  for (const entry of readdirSync(pidDir)) {
    if (only && !only.includes(entry.replace(/\.json$/, ""))) continue;
    const file = join(pidDir, entry);
    const { pid, marker } = JSON.parse(readFileSync(file, "utf8")) as { pid: number; marker: string };
    if (isOurs(pid, marker)) live.push({ name: entry.replace(/\.json$/, ""), pid, file });
    else rmSync(file, { force: true });
  }
  for (const p of live) signal(p.pid, "SIGTERM");
  const deadline = Date.now() + 10_000;
  while (live.some((p) => isOurs(p.pid, stateDir)) && Date.now() < deadline) await sleep(100);
  for (const p of live) if (isOurs(p.pid, stateDir)) signal(p.pid, "SIGKILL");
  for (const p of live) rmSync(p.file, { force: true });
  return live.map((p) => p.name);
}

/**
 * Sends a signal to one process this state dir started (SIGSTOP freezes it: its port still accepts
 * connections, which then hang, as a spoke behind a dead network path does; SIGCONT resumes it).
 */
export function signalProcess(stateDir: string, name: string, sig: NodeJS.Signals): void {
  signal(runningPid(stateDir, name), sig);
}

/**
 * Sets the nice value of every thread of a running process (Linux keeps one per thread, and a Go binary's
 * threads already run), as `renice` would for each.
 */
export function setNiceness(stateDir: string, name: string, niceness: number): void {
  const pid = runningPid(stateDir, name);
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      setPriority(Number(task), niceness);
    } catch {
      // the thread ended meanwhile
    }
  }
}

function runningPid(stateDir: string, name: string): number {
  const file = join(stateDir, "pids", `${name}.json`);
  const { pid, marker } = JSON.parse(readFileSync(file, "utf8")) as { pid: number; marker: string };
  if (!isOurs(pid, marker)) throw new Error(`sandbox: ${name} is not running`);
  return pid;
}

/**
 * Restarts one process this state dir started with the command line it runs (read from /proc): SIGTERM,
 * SIGKILL after 10 s, `downMs` with nothing running, then the same binary and arguments again (its log
 * goes on in the same file). A restarted API server keeps its port, certificates and etcd prefix.
 */
export async function restartProcess(stateDir: string, name: string, downMs = 0): Promise<ManagedProcess> {
  const file = join(stateDir, "pids", `${name}.json`);
  const { pid, marker } = JSON.parse(readFileSync(file, "utf8")) as { pid: number; marker: string };
  if (!isOurs(pid, marker)) throw new Error(`sandbox: ${name} is not running`);
  const [binary, ...args] = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0$/, "").split("\0");
  signal(pid, "SIGTERM");
  const deadline = Date.now() + 10_000;
  while (isOurs(pid, marker) && Date.now() < deadline) await sleep(100);
  if (isOurs(pid, marker)) signal(pid, "SIGKILL");
  while (isOurs(pid, marker)) await sleep(100);
  await sleep(downMs);
  return startProcess(stateDir, name, binary!, args);
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig); // the whole process group
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}

/** A free TCP port on 127.0.0.1 (asked from the kernel), so sandboxes can run side by side. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts a server on a port `freePort` chose, and makes sure it got it: between the kernel naming a free
 * port and the server binding it, another process of the machine (a test's server, another sandbox) may
 * take it, and the server then exits at once ("address already in use"). It is started again on another
 * port, up to 5 times. Resolves once the port accepts connections; a server that is alive but slow to
 * listen is left to the readiness checks after it.
 */
export async function startOnFreePort(
  stateDir: string,
  name: string,
  binary: string,
  args: (port: number) => string[],
): Promise<ManagedProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const started = startProcess(stateDir, name, binary, args(port));
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (await accepts(port)) return started;
      if (started.exited()) break;
      await sleep(200);
    }
    if (!started.exited()) return started;
    if (attempt === 5) throw new Error(`sandbox: ${name} exited at start 5 times (see logs/${name}.log)`);
  }
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** Polls `check` until it returns true or the timeout passes; the error names what was awaited. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (err) {
      lastError = err;
    }
    await sleep(200);
  }
  const detail = lastError instanceof Error ? `: ${lastError.message}` : "";
  throw new Error(`sandbox: timed out after ${timeoutMs / 1000}s waiting for ${what}${detail}`);
}
