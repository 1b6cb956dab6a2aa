import { execFile, spawn } from "node:child_process";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

const execFileAsync = promisify(execFile);

/** Credentials the server demands; without them every repository is public. */
export type GitServerAuth = { username: string; password: string } | { token: string };

export interface GitServerOptions {
  auth?: GitServerAuth;
  /** Serve https with this PEM key and certificate (the certificate must name 127.0.0.1). */
  tls?: { key: string; cert: string };
  /**
   * Offer the `filter` capability (uploadpack.allowFilter), as GitHub, GitLab and Gitea do; git's own
   * default, and so a plain `git http-backend`, offers none.
   */
  allowFilter?: boolean;
}

/** One request as the server saw it, for tests that count round trips or bytes. */
export interface RecordedRequest {
  method: string;
  /** Path after the repository, e.g. `/info/refs` or `/git-upload-pack`. */
  path: string;
  /** `git-upload-pack` or `git-receive-pack`, from the path or the `service` query parameter. */
  service: string | undefined;
  /** The Git-Protocol header: `version=2` for protocol v2 (ls-refs), absent for v1 pack negotiation. */
  gitProtocol: string | undefined;
  status: number;
  responseBytes: number;
}

export interface Author {
  name: string;
  email: string;
}

/** A change a person pushes: path -> new content, or null to delete the file. */
export interface PersonChange {
  files: Record<string, string | null>;
  message: string;
  author?: Author;
  branch?: string;
}

export interface LogEntry {
  commit: string;
  subject: string;
  authorName: string;
}

const defaultPerson: Author = { name: "Ada Operator", email: "ada@example.com" };

/**
 * A real git server over smart HTTP: node:http in front of `git http-backend` (CGI), serving bare
 * repositories from a temporary directory. People's pushes go straight to the bare repositories on disk,
 * so they are neither counted in `requests` nor hit by injected faults.
 */
export class GitServer {
  readonly root: string;
  readonly requests: RecordedRequest[] = [];
  private readonly auth: GitServerAuth | undefined;
  private readonly allowFilter: boolean;
  private readonly server: Server | HttpsServer;
  private readonly scheme: "http" | "https";
  private port = 0;
  private failuresLeft = 0;
  private failureStatus = 500;
  private delayMs = 0;
  private interceptors: { match: (request: RecordedRequest) => boolean; run: () => Promise<void> }[] = [];

  constructor(root: string, options: GitServerOptions) {
    this.root = root;
    this.auth = options.auth;
    this.allowFilter = options.allowFilter ?? false;
    const listener = (req: IncomingMessage, res: ServerResponse) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(err));
      });
    };
    this.server = options.tls ? createHttpsServer(options.tls, listener) : createServer(listener);
    this.scheme = options.tls ? "https" : "http";
  }

  /** Listens on a free loopback port the first time, on the same port after `stop()`. */
  async start(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.port, "127.0.0.1", () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  /** Simulates the server being down: the port refuses connections until `start()`. */
  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  async close(): Promise<void> {
    if (this.server.listening) await this.stop();
    await rm(this.root, { recursive: true, force: true });
  }

  url(repo: string): string {
    return `${this.scheme}://127.0.0.1:${this.port}/${repo}.git`;
  }

  repoPath(repo: string): string {
    return join(this.root, `${repo}.git`);
  }

  /** The next `count` requests get `status` without reaching git. */
  failNext(count: number, status = 500): void {
    this.failuresLeft = count;
    this.failureStatus = status;
  }

  /** Every request waits this long before it is served. */
  setDelay(ms: number): void {
    this.delayMs = ms;
  }

  /**
   * Runs `run` once, before serving the first request that `match` accepts (e.g. a racing push). Each
   * request triggers at most one of them, the earliest registered.
   */
  beforeRequest(match: (request: RecordedRequest) => boolean, run: () => Promise<void>): void {
    this.interceptors.push({ match, run });
  }

  resetRequests(): void {
    this.requests.length = 0;
  }

  /** Creates a bare repository whose `main` has one commit with the files of a directory or a record. */
  async createRepo(repo: string, files: string | Record<string, string>): Promise<string> {
    await git(this.root, ["init", "--quiet", "--bare", "--initial-branch=main", this.repoPath(repo)]);
    const work = await mkdtemp(join(this.root, "seed-"));
    try {
      await git(work, ["init", "--quiet", "--initial-branch=main"]);
      if (typeof files === "string") await cp(files, work, { recursive: true });
      else await writeFiles(work, files);
      return await commitAndPushWorkTree(work, this.repoPath(repo), "main", "Initial fleet", defaultPerson);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Pushes a change as a person would: clone, edit, commit, push; a new branch starts from `main`. */
  async pushChange(repo: string, change: PersonChange): Promise<string> {
    const branch = change.branch ?? "main";
    const from = (await this.headOf(repo, branch)) ? branch : "main";
    const work = await mkdtemp(join(this.root, "person-"));
    try {
      await git(this.root, ["clone", "--quiet", "--branch", from, this.repoPath(repo), work]);
      await writeFiles(work, change.files);
      return await commitAndPushWorkTree(
        work,
        "origin",
        branch,
        change.message,
        change.author ?? defaultPerson,
      );
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** The branch head on the server, or undefined when the branch does not exist. */
  async headOf(repo: string, branch = "main"): Promise<string | undefined> {
    try {
      return await git(this.repoPath(repo), ["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`]);
    } catch {
      return undefined;
    }
  }

  /** The branch history, newest first. */
  async log(repo: string, branch = "main"): Promise<LogEntry[]> {
    const out = await git(this.repoPath(repo), ["log", "--format=%H%x00%s%x00%an", `refs/heads/${branch}`]);
    return out.split("\n").map((line) => {
      const [commit, subject, authorName] = line.split("\0") as [string, string, string];
      return { commit, subject, authorName };
    });
  }

  async readFile(repo: string, branch: string, path: string): Promise<string> {
    return git(this.repoPath(repo), ["show", `refs/heads/${branch}:${path}`], false);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://git");
    const match = /^\/[^/]+\.git(\/.*)$/.exec(url.pathname);
    const path = match?.[1] ?? url.pathname;
    const service = url.searchParams.get("service") ?? /\/(git-[a-z-]+)$/.exec(path)?.[1];
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path,
      service,
      gitProtocol: req.headers["git-protocol"] as string | undefined,
      status: 0,
      responseBytes: 0,
    };
    this.requests.push(record);
    res.on("finish", () => {
      record.status = res.statusCode;
    });

    const interceptor = this.interceptors.findIndex((i) => i.match(record));
    if (interceptor !== -1) await this.interceptors.splice(interceptor, 1)[0]!.run();
    if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (this.failuresLeft > 0) {
      this.failuresLeft--;
      res.writeHead(this.failureStatus, { "content-type": "text/plain" }).end("injected failure\n");
      return;
    }
    const remoteUser = this.authenticate(req.headers.authorization);
    if (remoteUser === null) {
      res.writeHead(401, { "www-authenticate": 'Basic realm="git"' }).end("authentication required\n");
      return;
    }
    this.runHttpBackend(req, res, url, remoteUser, (bytes) => {
      record.responseBytes += bytes;
    });
  }

  /** The REMOTE_USER for a request: "" when the server is open, null when the credentials are wrong. */
  private authenticate(header: string | undefined): string | null {
    if (!this.auth) return "";
    if ("token" in this.auth) return header === `Bearer ${this.auth.token}` ? "token" : null;
    const expected = Buffer.from(`${this.auth.username}:${this.auth.password}`).toString("base64");
    return header === `Basic ${expected}` ? this.auth.username : null;
  }

  private runHttpBackend(
    req: IncomingMessage,
    res: ServerResponse,
    url: URL,
    remoteUser: string,
    onBodyBytes: (bytes: number) => void,
  ): void {
    const backend = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        HOME: this.root,
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_PROJECT_ROOT: this.root,
        GIT_HTTP_EXPORT_ALL: "1",
        // Lets anonymous and authenticated clients push (http-backend refuses receive-pack otherwise).
        GIT_CONFIG_COUNT: "2",
        GIT_CONFIG_KEY_0: "http.receivepack",
        GIT_CONFIG_VALUE_0: "true",
        GIT_CONFIG_KEY_1: "uploadpack.allowFilter",
        GIT_CONFIG_VALUE_1: String(this.allowFilter),
        REQUEST_METHOD: req.method,
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        // Absent for chunked requests: http-backend then reads the body to EOF.
        ...(req.headers["content-length"] ? { CONTENT_LENGTH: req.headers["content-length"] } : {}),
        REMOTE_USER: remoteUser,
        REMOTE_ADDR: req.socket.remoteAddress ?? "",
        HTTP_CONTENT_ENCODING: req.headers["content-encoding"] ?? "",
        GIT_PROTOCOL: (req.headers["git-protocol"] as string | undefined) ?? "",
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(backend.stdin);
    backend.stdin.on("error", () => {}); // http-backend may exit before reading a refused request's body
    // The client went away mid-response: stop the backend rather than let it write into nothing.
    res.on("close", () => {
      if (!res.writableFinished) backend.kill();
    });
    backend.on("error", (err) => res.destroy(err));
    pipeCgiResponse(backend.stdout, res, onBodyBytes);
  }
}

/** Starts a git smart-HTTP server on a free loopback port with an empty temporary project root. */
export async function startGitServer(options: GitServerOptions = {}): Promise<GitServer> {
  const root = await mkdtemp(join(tmpdir(), "knative-fleet-git-"));
  const server = new GitServer(root, options);
  await server.start();
  return server;
}

/** Turns CGI output (header lines, blank line, body) into the HTTP response, streaming the body. */
function pipeCgiResponse(
  cgiOut: NodeJS.ReadableStream,
  res: ServerResponse,
  onBodyBytes: (bytes: number) => void,
): void {
  let head = Buffer.alloc(0);
  const onHeadData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end === -1) return;
    cgiOut.off("data", onHeadData);
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString("latin1").split("\r\n")) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === "status") status = Number.parseInt(value, 10);
      else headers[name] = value;
    }
    res.writeHead(status, headers);
    const bodyStart = head.subarray(end + 4);
    onBodyBytes(bodyStart.length);
    res.write(bodyStart);
    cgiOut.on("data", (body: Buffer) => onBodyBytes(body.length));
    cgiOut.pipe(res);
  };
  cgiOut.on("data", onHeadData);
  cgiOut.on("end", () => {
    if (!res.headersSent) res.writeHead(502).end("http-backend sent no headers\n");
  });
}

async function writeFiles(work: string, files: Record<string, string | null>): Promise<void> {
  for (const [path, content] of Object.entries(files)) {
    const target = join(work, path);
    if (content === null) {
      await rm(target, { force: true });
    } else {
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, content);
    }
  }
}

async function commitAndPushWorkTree(
  work: string,
  remote: string,
  branch: string,
  message: string,
  author: Author,
): Promise<string> {
  await git(work, ["add", "--all"]);
  const as = ["-c", `user.name=${author.name}`, "-c", `user.email=${author.email}`];
  await git(work, [...as, "commit", "-qm", message]);
  // As a person does when the bot's status commit landed first: pull --rebase, push again.
  for (let attempt = 1; ; attempt++) {
    try {
      await git(work, ["push", "--quiet", remote, `HEAD:refs/heads/${branch}`]);
      return git(work, ["rev-parse", "HEAD"]);
    } catch (err) {
      if (attempt >= 5 || remote !== "origin") throw err;
      await git(work, [...as, "pull", "--quiet", "--rebase", remote, branch]);
    }
  }
}

async function git(cwd: string, args: string[], trim = true): Promise<string> {
  const { stdout } = await execFileAsync("git", args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: cwd, GIT_CONFIG_NOSYSTEM: "1" },
    maxBuffer: 64 * 1024 * 1024,
  });
  return trim ? stdout.trim() : stdout;
}

/**
 * A person's change pushed to a repository on another Git host over HTTP (the sandbox's Gitea): cloned with
 * the basic credentials in a header of the clone's own config (never in the URL), rebased and pushed again
 * when the bot's status commit landed first. The new commit.
 */
export async function pushChangeOverHttp(
  cloneUrl: string,
  credentials: { username: string; password: string },
  change: PersonChange,
): Promise<string> {
  const work = await mkdtemp(join(tmpdir(), "knative-fleet-person-"));
  const header = `Authorization: Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString("base64")}`;
  try {
    await git(work, ["-c", `http.extraHeader=${header}`, "clone", "--quiet", cloneUrl, "."]);
    await git(work, ["config", "http.extraHeader", header]);
    await writeFiles(work, change.files);
    return await commitAndPushWorkTree(
      work,
      "origin",
      change.branch ?? "main",
      change.message,
      change.author ?? defaultPerson,
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
