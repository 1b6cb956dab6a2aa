import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { startOnFreePort, stopAll, waitFor } from "./processes.ts";
import { ensureTools, giteaStaticRoot, toolPath } from "./tools.ts";

/**
 * A real Git forge for the tests: Gitea, built from its Go module by build-tools.sh and cached with the other
 * sandbox tools. What the reconciler does with a forge (commit statuses on the commits it applies, pull
 * requests, webhooks that start a pass) is then checked against the forge's own API and behaviour, not
 * against what a fake believes they are. Each instance is its own: a temp dir (sqlite database,
 * repositories, log), a free port on 127.0.0.1, an admin user and an all-scopes token; it delivers
 * webhooks to loopback addresses. Gitea refuses to run as root: under root it runs as uid 65534 (nobody),
 * from a hard-linked (or copied) binary and static root inside its dir, since the tool cache may sit where
 * that user cannot reach it (~root is 0700).
 */

const execFileAsync = promisify(execFile);

const NOBODY = 65534;

export interface GiteaOptions {
  /** Where Gitea keeps everything; a new temp dir by default. */
  dir?: string;
  /** Leave the dir in place on stop (to read the log or the repositories after a failure). */
  keep?: boolean;
}

export interface GiteaRepo {
  owner: string;
  name: string;
  /** http://127.0.0.1:PORT/owner/name.git */
  cloneUrl: string;
}

export interface Gitea {
  /** http://127.0.0.1:PORT, without a trailing slash. */
  url: string;
  /** The admin user, and its password (basic auth) and all-scopes access token (also usable as a password). */
  user: string;
  password: string;
  token: string;
  dir: string;
  /** Gitea's log (its stdout and stderr), for error messages. */
  logFile: string;
  /** A new, empty repository of the admin user. */
  createRepo(name: string, options?: { private?: boolean; defaultBranch?: string }): Promise<GiteaRepo>;
  /** A call to Gitea's REST API (`path` under /api/v1) with the token; throws on a non-2xx answer. */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
  /** SIGTERM, SIGKILL after 10 s; removes the dir unless `keep`. */
  stop(): Promise<void>;
}

export async function startGitea(options: GiteaOptions = {}): Promise<Gitea> {
  const binDir = ensureTools("gitea");
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "knative-fleet-gitea-"));
  mkdirSync(dir, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  const runUser = asRoot ? passwdName(NOBODY) : userInfo().username;

  // Gitea's binary and static root, where the run user can read them; only the dirs it writes are its own.
  const dist = join(dir, "dist");
  mkdirSync(dist, { recursive: true, mode: 0o755 });
  const gitea = join(dist, "gitea");
  if (!existsSync(gitea)) linkOrCopy(realpathSync(toolPath(binDir, "gitea")), gitea);
  const staticRoot = join(dist, "static");
  if (!existsSync(staticRoot)) await linkOrCopyTree(giteaStaticRoot(binDir), staticRoot);
  const custom = join(dir, "custom");
  const config = join(custom, "conf", "app.ini");
  const home = join(dir, "home");
  for (const d of [join(custom, "conf"), join(dir, "data"), join(dir, "repos"), home])
    mkdirSync(d, { recursive: true });
  if (asRoot)
    for (const d of [dir, custom, join(custom, "conf"), join(dir, "data"), join(dir, "repos"), home])
      chownSync(d, NOBODY, NOBODY);

  const secrets = {
    secretKey: randomBytes(32).toString("hex"),
    internalToken: randomBytes(48).toString("base64url"),
    jwtSecret: randomBytes(32).toString("base64url"),
  };
  const writeConfig = (port: number) => {
    writeFileSync(config, appIni({ dir, staticRoot, runUser, port, ...secrets }), { mode: 0o600 });
    if (asRoot) chownSync(config, NOBODY, NOBODY);
  };
  // As the run user, in a clean environment (no GITEA__* or GIT_* of the caller's), on this dir's config.
  const command = (args: string[]): [string, string[]] => {
    const env = ["-i", `PATH=${process.env.PATH ?? "/usr/bin:/bin"}`, `HOME=${home}`, `USER=${runUser}`];
    env.push(`GITEA_WORK_DIR=${dir}`, `GITEA_CUSTOM=${custom}`);
    const run = [...env, gitea, "--config", config, "--work-path", dir, "--custom-path", custom, ...args];
    return asRoot
      ? ["setpriv", [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "env", ...run]]
      : ["env", run];
  };
  const logFile = join(dir, "logs", "gitea.log");
  const fail = (what: string, err: unknown): Error => {
    const detail = err instanceof Error ? err.message : String(err);
    const log = existsSync(logFile) ? `\n--- ${logFile} (last lines) ---\n${tail(logFile, 40)}` : "";
    return new Error(`gitea: ${what} failed (dir ${dir} kept): ${detail}${log}`);
  };
  const cli = async (...args: string[]): Promise<string> => {
    const [binary, argv] = command(args);
    try {
      const { stdout } = await execFileAsync(binary, argv, { cwd: dir, maxBuffer: 16 * 1024 * 1024 });
      return stdout;
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr ?? "";
      throw fail(`gitea ${args.slice(0, 3).join(" ")}`, new Error(`${(err as Error).message}\n${stderr}`));
    }
  };

  const user = "fleet-admin";
  const password = randomBytes(16).toString("hex");
  writeConfig(0); // the port is chosen when the server starts; the CLI commands below do not listen
  await cli("migrate");
  await cli(
    "admin",
    "user",
    "create",
    "--admin",
    "--username",
    user,
    "--password",
    password,
    "--email",
    `${user}@example.com`,
    "--must-change-password=false",
  );
  const token = (
    await cli(
      "admin",
      "user",
      "generate-access-token",
      "--username",
      user,
      "--token-name",
      "sandbox",
      "--scopes",
      "all",
      "--raw",
    )
  )
    .trim()
    .split("\n")
    .at(-1)!;
  if (!/^[0-9a-f]{40}$/.test(token))
    throw fail("generate-access-token", new Error(`unexpected output ${JSON.stringify(token)}`));

  let port = 0;
  try {
    const [binary] = command([]);
    await startOnFreePort(dir, "gitea", binary, (p) => {
      // Gitea takes its port from app.ini (its --port flag rewrites the file): a new config per attempt.
      port = p;
      writeConfig(p);
      return command(["web"])[1];
    });
  } catch (err) {
    throw fail("gitea web", err);
  }
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(`gitea at ${url}`, async () => (await fetch(`${url}/api/v1/version`)).ok, 60_000);
  } catch (err) {
    await stopAll(dir);
    throw fail("gitea web", err);
  }

  const api = async <T = unknown>(method: string, path: string, body?: unknown): Promise<T> => {
    const response = await fetch(`${url}/api/v1${path}`, {
      method,
      headers: {
        authorization: `token ${token}`,
        accept: "application/json",
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok)
      throw new Error(`gitea: ${method} ${path}: ${response.status} ${text} (log: ${logFile})`);
    return (text ? JSON.parse(text) : undefined) as T;
  };

  return {
    url,
    user,
    password,
    token,
    dir,
    logFile,
    api,
    async createRepo(name, repo = {}) {
      const created = await api<CreatedRepo>("POST", "/user/repos", {
        name,
        private: repo.private ?? false,
        auto_init: false,
        default_branch: repo.defaultBranch ?? "main",
      });
      return { owner: created.owner.login, name: created.name, cloneUrl: created.clone_url };
    },
    async stop() {
      await stopAll(dir);
      if (!options.keep) rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface CreatedRepo {
  name: string;
  owner: { login: string };
  clone_url: string;
}

interface IniValues {
  dir: string;
  staticRoot: string;
  runUser: string;
  port: number;
  secretKey: string;
  internalToken: string;
  jwtSecret: string;
}

function appIni(v: IniValues): string {
  const root = `http://127.0.0.1:${v.port}/`;
  return `APP_NAME = knative-fleet sandbox forge
RUN_USER = ${v.runUser}
RUN_MODE = prod
WORK_PATH = ${v.dir}

[server]
PROTOCOL = http
DOMAIN = 127.0.0.1
HTTP_ADDR = 127.0.0.1
HTTP_PORT = ${v.port}
ROOT_URL = ${root}
LOCAL_ROOT_URL = ${root}
APP_DATA_PATH = ${join(v.dir, "data")}
STATIC_ROOT_PATH = ${v.staticRoot}
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
OFFLINE_MODE = true

[database]
DB_TYPE = sqlite3
PATH = ${join(v.dir, "data", "gitea.db")}
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = ${join(v.dir, "repos")}
DEFAULT_BRANCH = main

[security]
INSTALL_LOCK = true
SECRET_KEY = ${v.secretKey}
INTERNAL_TOKEN = ${v.internalToken}

[oauth2]
JWT_SECRET = ${v.jwtSecret}

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
ENABLE_NOTIFY_MAIL = false

[webhook]
ALLOWED_HOST_LIST = loopback
SKIP_TLS_VERIFY = true

[actions]
ENABLED = false

[mailer]
ENABLED = false

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[cron]
ENABLED = false
RUN_AT_START = false

[cron.update_checker]
ENABLED = false

[log]
MODE = console
LEVEL = Info

[log.console]
STDERR = true
`;
}

/** The user name /etc/passwd gives a uid (Gitea checks RUN_USER against the user it runs as). */
function passwdName(uid: number): string {
  for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
    const [name, , id] = line.split(":");
    if (id === String(uid) && name) return name;
  }
  throw new Error(`gitea: no user with uid ${uid} in /etc/passwd`);
}

function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch {
    copyFileSync(from, to);
    chmodSync(to, 0o755);
  }
}

/** A tree of hard links (cp -al: fast, no copy), or a copy where links cannot be made (another filesystem). */
async function linkOrCopyTree(from: string, to: string): Promise<void> {
  try {
    await execFileAsync("cp", ["-al", from, to]);
  } catch {
    rmSync(to, { recursive: true, force: true });
    cpSync(from, to, { recursive: true });
  }
}

function tail(file: string, lines: number): string {
  return readFileSync(file, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
}
