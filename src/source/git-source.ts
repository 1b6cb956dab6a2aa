import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import git, { type HttpClient } from "isomorphic-git";
import { type FleetFile, fleetFileContent, MAX_FLEET_FILE_BYTES } from "../fleet/file-text.ts";
import { createFileFilter, type FileSelection, type FleetFileFilter } from "../fleet/select.ts";
import { classifyGitError, type GitOperation, GitSourceError, gitError, isTransient } from "./errors.ts";
import { createHttpClient, type FetchLimits } from "./http-client.ts";
import { type BackoffPolicy, defaultBackoff, retry } from "./retry.ts";
import { authorizationHeader } from "./secrets.ts";
import type { GitSourceSpec } from "./spec.ts";
import { readFleetTree, yamlLeftOutOfTree } from "./tree.ts";
import {
  type FileChanges,
  type FilesAt,
  filesAt,
  type ObjectStore,
  writeTreeWithChanges,
} from "./tree-edit.ts";

/** How far back an earlier commit is looked for, and in steps of how many commits. */
const HISTORY_STEP = 50;
const MAX_HISTORY = 1000;

/** The fleet files of one commit. Only a successful read produces one: a failure throws, never "empty". */
export interface Snapshot {
  commit: string;
  /** Sorted by path; paths the selection matches that hold no readable file come with their problem. */
  files: FleetFile[];
  /** sha256 of the paths and contents: equal digests mean equal fleet content, whatever the commit. */
  digest: string;
}

interface CommitAuthor {
  name: string;
  email: string;
}

/** The commit a write-back builds on, for callers that derive their changes from what is there. */
export interface CommitBase extends FilesAt {
  commit: string;
}

export interface CommitAndPushRequest {
  /**
   * The changes, or a function that builds them on the branch head; it is called again on the new head
   * when another push won the race. It must not call back into this GitSource.
   */
  files: FileChanges | ((base: CommitBase) => FileChanges | Promise<FileChanges>);
  message: string;
  author: CommitAuthor;
  /** Default: the source branch. A missing branch is created from the source branch head. */
  branch?: string;
}

interface CommitAndPushResult {
  /** False when the changes left the tree as it was: nothing was committed. */
  pushed: boolean;
  /** The new commit, or the unchanged head. */
  commit: string;
  attempts: number;
}

export interface GitSourceOptions {
  /** Parent directory of the local clones; each remote gets its own folder in it. */
  cacheDir: string;
  /** Retries of a write-back whose push lost a race or failed on the network. */
  pushBackoff?: BackoffPolicy;
  /** isomorphic-git writes one pack per fetch; past this many the clone is started afresh. */
  maxPacks?: number;
}

/**
 * One branch of one remote repository, fetched shallow (depth 1, that branch only) into a local bare
 * cache. Reads come from the object store, never a working tree, so a snapshot is exactly its commit.
 * Operations on the cache run one at a time; `headOf` needs no cache and runs beside them.
 */
export class GitSource {
  readonly spec: GitSourceSpec;
  readonly filter: FleetFileFilter;
  private readonly gitdir: string;
  private readonly pushBackoff: BackoffPolicy;
  private readonly maxPacks: number;
  private objectCache: object = {};
  private queue: Promise<unknown> = Promise.resolve();

  constructor(spec: GitSourceSpec, options: GitSourceOptions) {
    this.spec = spec;
    this.filter = createFileFilter(this.selection);
    const remoteKey = createHash("sha256").update(spec.url).digest("hex").slice(0, 16);
    this.gitdir = join(options.cacheDir, `${remoteKey}.git`);
    this.pushBackoff = options.pushBackoff ?? defaultBackoff;
    this.maxPacks = options.maxPacks ?? 50;
  }

  /**
   * The commit the branch points to on the server, from a protocol-v2 ls-refs limited to that one ref:
   * no objects are fetched, and repositories with thousands of refs cost no more than small ones.
   */
  async headOf(branch = this.spec.branch): Promise<string> {
    const ref = `refs/heads/${branch}`;
    const refs = await this.remote("head", undefined, (http, headers) =>
      git.listServerRefs({ http, headers, url: this.spec.url, prefix: ref, protocolVersion: 2 }),
    );
    const head = refs.find((r) => r.ref === ref)?.oid;
    if (!head) throw this.missingBranch("head", branch);
    return head;
  }

  /** Fetches the branch head (shallow) into the cache and returns it. */
  async fetch(branch = this.spec.branch): Promise<string> {
    return this.exclusive(() => this.recovering(() => this.fetchIntoCache(branch)));
  }

  /** Reads the fleet files of a commit that is in the cache. */
  async snapshot(commit: string): Promise<Snapshot> {
    return this.exclusive(() => this.readSnapshot(commit));
  }

  /** The YAML files of a cached commit that the file glob leaves out, with their blob ids (plan lists them). */
  async yamlLeftOut(commit: string): Promise<Map<string, string>> {
    return this.exclusive(() =>
      this.local("read", () => yamlLeftOutOfTree(this.store, commit, this.selection)),
    );
  }

  /**
   * Reads the fleet files of an earlier commit of the branch (what a rollout revert goes back to): from the
   * cache when it holds the commit, else the shallow history is deepened, a step at a time, until it does.
   */
  async snapshotAt(commit: string): Promise<Snapshot> {
    return this.exclusive(() =>
      this.recovering(async () => {
        let boundary = await this.shallowBoundary();
        for (let depth = HISTORY_STEP; !(await this.hasCommit(commit)); depth += HISTORY_STEP) {
          const whole = boundary === "";
          if (whole || depth > MAX_HISTORY) {
            const where = whole ? "in the history" : `among the last ${MAX_HISTORY} commits`;
            throw gitError(
              "not-found",
              "fetch",
              this.spec.url,
              `commit ${commit} is not ${where} of branch "${this.spec.branch}"`,
            );
          }
          await this.local("fetch", () => this.prepareCache());
          await this.fetchHistory(this.spec.branch, depth);
          const deeper = await this.shallowBoundary();
          // The same boundary after a deeper fetch: the branch has no older commits.
          boundary = deeper === boundary ? "" : deeper;
        }
        return this.readSnapshot(commit);
      }),
    );
  }

  /**
   * The commit that brought a snapshot's fleet content: back along first parents while the parent holds the
   * same fleet content (the bot's status commits, a README change on top of a person's commit), at most
   * `limit` steps. What a rollout is named after and its statuses are posted on: the person's commit, not a
   * status commit that landed on it before the poll. A history that cannot be read stops the walk there.
   */
  async contentOrigin(snapshot: Snapshot, limit = 8): Promise<string> {
    let commit = snapshot.commit;
    for (let step = 0; step < limit; step++) {
      const at = commit;
      const parent = await this.exclusive(() =>
        this.local("read", async () => (await git.readCommit({ ...this.store, oid: at })).commit.parent[0]),
      ).catch(() => undefined);
      if (parent === undefined) return commit;
      const earlier = await this.snapshotAt(parent).catch(() => undefined);
      if (earlier?.digest !== snapshot.digest) return commit;
      commit = parent;
    }
    return commit;
  }

  /** Fetches the source branch and reads its fleet files. */
  async sync(): Promise<Snapshot> {
    return this.exclusive(() =>
      this.recovering(async () => this.readSnapshot(await this.fetchIntoCache(this.spec.branch))),
    );
  }

  /**
   * Commits the changes on top of the branch head as it is on the server and pushes, never forcing: when
   * another push lands first, the push is rejected, the new head fetched, the changes rebuilt on it and
   * the push tried again, so no one else's commit is ever lost.
   */
  async commitAndPush(request: CommitAndPushRequest): Promise<CommitAndPushResult> {
    const branch = request.branch ?? this.spec.branch;
    return retry(
      (attempt) =>
        this.exclusive(() => this.recovering(() => this.commitAndPushOnce(request, branch, attempt))),
      this.pushBackoff,
      (error) => error instanceof GitSourceError && (isTransient(error) || error.kind === "rejected"),
    );
  }

  private async commitAndPushOnce(
    request: CommitAndPushRequest,
    branch: string,
    attempt: number,
  ): Promise<CommitAndPushResult> {
    const parent = await this.fetchBranchOrSourceHead(branch);
    const changes =
      typeof request.files === "function"
        ? await request.files(await this.commitBase(parent))
        : request.files;
    const outgoing = `refs/outgoing/${branch}`;
    const commit = await this.local("push", () => this.writeCommitOnto(parent, changes, request, outgoing));
    if (!commit) return { pushed: false, commit: parent, attempts: attempt };
    // isomorphic-git refuses a non-fast-forward before sending anything, and the server's compare-and-swap
    // on the old head refuses a push that raced with another one; both surface as "rejected".
    await this.remote("push", undefined, (http, headers) =>
      git.push({
        ...this.store,
        http,
        headers,
        url: this.spec.url,
        ref: outgoing,
        remoteRef: `refs/heads/${branch}`,
      }),
    );
    await this.local("push", () =>
      git.writeRef({ ...this.store, ref: `refs/heads/${branch}`, value: commit, force: true }),
    );
    return { pushed: true, commit, attempts: attempt };
  }

  /** Writes a commit of `changes` on `parent` and points `ref` at it; undefined when nothing changes. */
  private async writeCommitOnto(
    parent: string,
    changes: FileChanges,
    request: CommitAndPushRequest,
    ref: string,
  ): Promise<string | undefined> {
    const { commit: parentCommit } = await git.readCommit({ ...this.store, oid: parent });
    const tree = await writeTreeWithChanges(this.store, parentCommit.tree, changes);
    if (tree === parentCommit.tree) return undefined;
    const signature = {
      name: request.author.name,
      email: request.author.email,
      timestamp: Math.floor(Date.now() / 1000),
      timezoneOffset: 0,
    };
    const commit = await git.writeCommit({
      ...this.store,
      commit: { tree, parent: [parent], author: signature, committer: signature, message: request.message },
    });
    await git.writeRef({ ...this.store, ref, value: commit, force: true });
    return commit;
  }

  private async fetchBranchOrSourceHead(branch: string): Promise<string> {
    try {
      return await this.fetchIntoCache(branch);
    } catch (error) {
      const missing = error instanceof GitSourceError && error.kind === "not-found";
      if (!missing || branch === this.spec.branch) throw error;
      return this.fetchIntoCache(this.spec.branch);
    }
  }

  private async commitBase(commit: string): Promise<CommitBase> {
    const read = <T>(reading: Promise<T>) =>
      reading.catch((error: unknown) => {
        throw classifyGitError(error, "read", this.spec.url);
      });
    const { commit: parsed } = await read(git.readCommit({ ...this.store, oid: commit }));
    const files = filesAt(this.store, parsed.tree);
    return {
      commit,
      readFile: (path) => read(files.readFile(path)),
      blobId: (path) => read(files.blobId(path)),
    };
  }

  private async fetchIntoCache(branch: string): Promise<string> {
    await this.local("fetch", () => this.prepareCache());
    return this.shallowFetch(branch);
  }

  /** Runs work on the cache; a cache left broken (a crash mid-write) would fail it forever: re-clone once. */
  private async recovering<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      if (!(error instanceof GitSourceError && error.kind === "internal")) throw error;
      await this.local("fetch", () => this.resetCache());
      return run();
    }
  }

  private async shallowFetch(branch: string): Promise<string> {
    const fetchHead = await this.fetchHistory(branch, 1);
    if (!fetchHead) throw this.missingBranch("fetch", branch);
    // The local branch is what the next fetch offers as "have": a head the cache already holds (our own
    // pushed status commit) then costs no objects. A moved head costs its whole tree, as isomorphic-git
    // speaks protocol v1, where `deepen` ignores haves; that keeps each fetch bounded by one tree, whatever
    // the history (a force push included), the trade Flux makes too.
    await this.local("fetch", () =>
      git.writeRef({ ...this.store, ref: `refs/heads/${branch}`, value: fetchHead, force: true }),
    );
    return fetchHead;
  }

  /** The shallow clone's boundary commits (the `shallow` file); "" when the history is whole. */
  private async shallowBoundary(): Promise<string> {
    return readFile(join(this.gitdir, "shallow"), "utf8").catch(() => "");
  }

  private async hasCommit(commit: string): Promise<boolean> {
    try {
      await git.readCommit({ ...this.store, oid: commit });
      return true;
    } catch (error) {
      if ((error as { code?: string }).code === "NotFoundError") return false;
      throw classifyGitError(error, "read", this.spec.url);
    }
  }

  /** The branch's last `depth` commits, with their trees; the head it fetched, or undefined without one. */
  private async fetchHistory(branch: string, depth: number): Promise<string | undefined> {
    // Blobs over the fleet file limit could only ever become "file too large" problems: the server keeps
    // them (a 150 MiB asset in the repository costs nothing), and readFleetTree reports a fleet file it left out.
    const limits: FetchLimits = {
      blobLimitBytes: MAX_FLEET_FILE_BYTES + 1,
      maxPackBytes: this.spec.maxFetchBytes,
      outcome: { filtered: false, overLimit: false },
    };
    const { fetchHead } = await this.remote("fetch", limits, (http, headers) =>
      git.fetch({
        ...this.store,
        http,
        headers,
        url: this.spec.url,
        ref: branch,
        singleBranch: true,
        depth,
        tags: false,
      }),
    );
    return fetchHead ?? undefined;
  }

  private async prepareCache(): Promise<void> {
    const packs = await readdir(join(this.gitdir, "objects", "pack")).catch(() => undefined);
    if (!packs) await this.resetCache();
    else if (packs.filter((name) => name.endsWith(".pack")).length > this.maxPacks) await this.resetCache();
  }

  private async resetCache(): Promise<void> {
    await rm(this.gitdir, { recursive: true, force: true });
    await mkdir(this.gitdir, { recursive: true });
    await git.init({ fs, gitdir: this.gitdir, bare: true });
    // isomorphic-git keeps the fetched head under the remote's refspec, so the remote must be configured.
    await git.addRemote({ fs, gitdir: this.gitdir, remote: "origin", url: this.spec.url });
    this.objectCache = {};
  }

  private async readSnapshot(commit: string): Promise<Snapshot> {
    const files = await this.local("read", () => readFleetTree(this.store, commit, this.selection));
    const digest = createHash("sha256");
    for (const file of files)
      digest.update(file.path).update("\0").update(fleetFileContent(file)).update("\0");
    return { commit, files, digest: digest.digest("hex") };
  }

  private get selection(): FileSelection {
    return { pathGlob: this.spec.pathGlob, statusDir: this.spec.statusDir };
  }

  private get store(): ObjectStore {
    return { fs, gitdir: this.gitdir, cache: this.objectCache };
  }

  /** Runs work on the local cache, typing its failures like those of the network operations. */
  private async local<T>(operation: GitOperation, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw classifyGitError(error, operation, this.spec.url);
    }
  }

  /**
   * Runs one network operation under the spec's deadline with fresh credentials and CA bundle, and turns
   * whatever fails into a typed GitSourceError.
   */
  private async remote<T>(
    operation: GitOperation,
    fetchLimits: FetchLimits | undefined,
    run: (http: HttpClient, headers: Record<string, string>) => Promise<T>,
  ): Promise<T> {
    const finished = new AbortController();
    const deadline = AbortSignal.timeout(this.spec.timeoutMs);
    const signal = AbortSignal.any([finished.signal, deadline]);
    const { url, auth, caFile, timeoutMs } = this.spec;
    try {
      const headers: Record<string, string> = {};
      if (auth) {
        headers.authorization = await authorizationHeader(auth).catch((error: unknown) => {
          throw gitError("auth", operation, url, `credentials unavailable: ${error}`);
        });
      }
      const ca = caFile
        ? await readFile(caFile, "utf8").catch((error: unknown) => {
            throw gitError("tls", operation, url, `CA bundle unavailable: ${error}`);
          })
        : undefined;
      return await run(createHttpClient({ signal, fetchLimits, ...(ca ? { ca } : {}) }), headers);
    } catch (error) {
      if (fetchLimits?.outcome.overLimit) {
        throw gitError(
          "too-large",
          operation,
          url,
          `the commit's pack is over maxFetchBytes (${fetchLimits.maxPackBytes} bytes) and the server cannot leave out large blobs; ` +
            "enable uploadpack.allowFilter on the server (GitHub and GitLab have it), move large files out of the repository, or raise maxFetchBytes",
          error,
        );
      }
      if (deadline.aborted)
        throw gitError("timeout", operation, url, `no answer within ${timeoutMs} ms`, error);
      throw classifyGitError(error, operation, url);
    } finally {
      finished.abort(); // releases any response isomorphic-git left unread
    }
  }

  private missingBranch(operation: GitOperation, branch: string): GitSourceError {
    return gitError("not-found", operation, this.spec.url, `no branch "${branch}"`);
  }

  private exclusive<T>(run: () => Promise<T>): Promise<T> {
    const result = this.queue.then(run);
    this.queue = result.catch(() => {});
    return result;
  }
}
