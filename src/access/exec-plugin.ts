import { spawn } from "node:child_process";
import type { Logger } from "pino";
import { kubeconfigNamespace, withBoundNamespace, withKubeconfigInNamespace } from "./credential-binding.ts";
import { accessProviderFailed } from "./errors.ts";
import {
  type ExecClusterInfo,
  execCredentialInput,
  type PluginCredential,
  parseExecCredential,
} from "./exec-credential.ts";
import { pluginStderrLine } from "./plugin-stderr.ts";
import type { EnvVar, ExecApiVersion } from "./provider-config.ts";

/** One cluster's copy of a provider's exec config, with the ClusterProfile's extra args and env applied. */
export interface ExecPlugin {
  providerName: string;
  apiVersion: ExecApiVersion;
  command: string;
  args: readonly string[];
  env: readonly EnvVar[];
  provideClusterInfo: boolean;
  installHint: string | undefined;
  /**
   * Where the plugin must read the ClusterProfile's credential (credential-binding.ts): its kubeconfig
   * (KUBECONFIG in env) is given to it with this namespace in the current context. Unset: as configured.
   */
  credentialsNamespace?: string;
}

interface ExecPluginRunOptions {
  /** The plugin is killed (with any processes it started) after this long. */
  timeoutMs: number;
  logger: Logger;
  signal?: AbortSignal;
  now?: () => Date;
}

// An ExecCredential is a few KiB; more means a confused plugin, not a credential worth buffering.
const MAX_STDOUT_BYTES = 1024 * 1024;
const STDERR_TAIL_BYTES = 16 * 1024;

/**
 * Runs a credential plugin once, as client-go does (execConfig.env + KUBERNETES_EXEC_INFO, no stdin), but
 * bounded in time and output, with only PATH and HOME of the service's environment (client-go passes all
 * of it: the controller's own settings and secrets are none of a plugin's business), and with stderr
 * reduced to its meaningful line and redacted before it goes anywhere. Every failure is an AccessError
 * (AccessProviderFailed) that says what to fix.
 */
export async function runExecPlugin(
  plugin: ExecPlugin,
  cluster: ExecClusterInfo,
  options: ExecPluginRunOptions,
): Promise<PluginCredential> {
  const now = options.now ?? (() => new Date());
  const log = options.logger.child({ accessProvider: plugin.providerName, command: plugin.command });
  const subject = `access provider "${plugin.providerName}": plugin ${plugin.command}`;
  const cancelled = "was stopped because the request for credentials was cancelled";
  if (options.signal?.aborted) throw accessProviderFailed(`${subject} ${cancelled}`);
  const env: NodeJS.ProcessEnv = {
    ...baseEnvironment(),
    ...Object.fromEntries(plugin.env.map((e) => [e.name, e.value])),
    KUBERNETES_EXEC_INFO: execCredentialInput(
      plugin.apiVersion,
      plugin.provideClusterInfo ? cluster : undefined,
    ),
  };
  const { credentialsNamespace } = plugin;
  const run = { log, subject, cancelled, now, readsFrom: credentialSecretHint(plugin, cluster) };
  const kubeconfig = env.KUBECONFIG;
  if (credentialsNamespace === undefined) {
    // Not bound to another namespace: the plugin reads where its kubeconfig says, NAMESPACE included.
    const readsIn = kubeconfig ? await kubeconfigNamespace(kubeconfig) : undefined;
    return spawnPlugin(plugin, withBoundNamespace(env, readsIn, subject), options, run);
  }
  if (!kubeconfig) {
    throw accessProviderFailed(
      `${subject} runs without KUBECONFIG in execConfig.env, so it cannot be pointed at the credentials ` +
        `namespace ${credentialsNamespace} (access.credentialNamespaces); give it the kubeconfig it reads Secrets with`,
    );
  }
  return withKubeconfigInNamespace(kubeconfig, credentialsNamespace, (copy) =>
    spawnPlugin(
      plugin,
      { ...withBoundNamespace(env, credentialsNamespace, subject), KUBECONFIG: copy },
      options,
      run,
    ),
  );
}

/** One run of the plugin's process with `env`; see runExecPlugin. */
function spawnPlugin(
  plugin: ExecPlugin,
  env: NodeJS.ProcessEnv,
  options: ExecPluginRunOptions,
  run: { log: Logger; subject: string; cancelled: string; now: () => Date; readsFrom: string },
): Promise<PluginCredential> {
  const { log, subject, cancelled, now, readsFrom } = run;
  return new Promise((resolve, reject) => {
    const started = Date.now();
    // Its own process group, so a timeout also ends whatever the plugin started (e.g. a shell's children).
    const child = spawn(plugin.command, [...plugin.args], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = "";
    let settled = false;

    // Also after the plugin itself exited: a process it left behind may still hold stdout open.
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // ESRCH: nothing of the group is left
      }
    };
    const finish = (outcome: () => PluginCredential) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      let credential: PluginCredential | undefined;
      try {
        credential = outcome();
        resolve(credential);
      } catch (err) {
        reject(err);
      } finally {
        logStderr(log, stderr, credential, Date.now() - started);
      }
    };
    const fail = (detail: string, cause?: unknown) =>
      finish(() => {
        throw accessProviderFailed(`${subject} ${detail}`, cause === undefined ? undefined : { cause });
      });

    const timer = setTimeout(() => {
      killGroup();
      fail(
        `did not finish within ${options.timeoutMs / 1000}s and was killed; check that it does not wait for ` +
          "input or for a server that does not answer",
      );
    }, options.timeoutMs);
    const onAbort = () => {
      killGroup();
      fail(cancelled);
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });

    child.stdout.on("data", (chunk: Buffer) => {
      stdoutBytes += chunk.length;
      if (stdoutBytes > MAX_STDOUT_BYTES) {
        killGroup();
        fail(`printed more than ${MAX_STDOUT_BYTES} bytes on stdout; an ExecCredential is a few KiB`);
        return;
      }
      stdout.push(chunk);
    });
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES);
    });
    child.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") {
        const hint = plugin.installHint ? ` ${plugin.installHint}` : "";
        fail(`was not found; install it or fix execConfig.command in the provider file.${hint}`, err);
      } else if (err.code === "EACCES") {
        fail("cannot be executed (permission denied); make it executable", err);
      } else {
        fail(`could not be started: ${err.message}`, err);
      }
    });
    child.on("close", (code, signal) => {
      if (signal !== null) {
        fail(`was killed by ${signal}${lastLine(stderr)}${readsFrom}`);
      } else if (code !== 0) {
        fail(`exited with code ${code}${lastLine(stderr)}${readsFrom}`);
      } else {
        finish(() => {
          try {
            return parseExecCredential(Buffer.concat(stdout).toString("utf8"), plugin.apiVersion, now());
          } catch (err) {
            throw accessProviderFailed(`${subject} returned an unusable answer: ${(err as Error).message}`);
          }
        });
      }
    });
  });
}

/**
 * `; it reads Secret <namespace>/<name> ...`: where the credential binding pointed the plugin, for the
 * operator fixing a mapping, as the plugin's own error names at most the Secret's name. Names only: the
 * namespace from access.credentialNamespaces, the name from the ClusterProfile's exec extension.
 */
function credentialSecretHint(plugin: ExecPlugin, cluster: ExecClusterInfo): string {
  const namespace = plugin.credentialsNamespace;
  if (namespace === undefined) return "";
  const extension = (cluster.config ?? {}) as Record<string, unknown>;
  const named = (key: string) =>
    typeof extension[key] === "string" ? (extension[key] as string) : undefined;
  const where = "access.credentialNamespaces";
  const name = named("name");
  if (name !== undefined)
    return `; it reads Secret ${namespace}/${name} (namespace from ${where}, name from the exec extension)`;
  const clusterName = named("clusterName");
  if (clusterName !== undefined)
    return `; it reads the Secret of cluster ${JSON.stringify(clusterName)} in namespace ${namespace} (${where})`;
  return `; it reads its Secret in namespace ${namespace} (${where})`;
}

/** PATH to find what the plugin runs, HOME for its caches; nothing else of the service's environment. */
function baseEnvironment(): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {};
  for (const name of ["PATH", "HOME"]) if (process.env[name] !== undefined) base[name] = process.env[name];
  return base;
}

/** `: <what the plugin said on stderr>`, the meaningful line, redacted. */
function lastLine(stderr: string): string {
  const line = pluginStderrLine(stderr);
  return line === "" ? " (nothing on stderr)" : `: ${line}`;
}

function logStderr(
  log: Logger,
  stderr: string,
  credential: PluginCredential | undefined,
  elapsedMs: number,
): void {
  const text = pluginStderrLine(stderr, credential?.secrets());
  if (credential) {
    log.debug(
      { elapsedMs, credential: credential.describe(), ...(text ? { stderr: text } : {}) },
      "credential plugin ran",
    );
  } else if (text) {
    log.warn({ elapsedMs, stderr: text }, "credential plugin failed");
  }
}
