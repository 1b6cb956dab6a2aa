import * as fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import git from "isomorphic-git";
import type { FleetFile } from "../fleet/model.ts";
import { createFileFilter, type FileSelection } from "../fleet/select.ts";
import {
  GitSource,
  GitSourceError,
  gitSourceSpecSchema,
  readFleetTree,
  yamlLeftOutOfTree,
} from "../source/index.ts";
import type { ChangedFile } from "./changes.ts";
import { maskText } from "./mask.ts";
import { resolveRevision, UnknownRevisionError } from "./resolve-revision.ts";

/** The fleet files of one commit. */
export interface Revision {
  /** The ref as given: a branch, a tag, `origin/main`, a commit. */
  ref: string;
  commit: string;
  /** Sorted by path. */
  files: FleetFile[];
  /** The YAML files the file glob leaves out, by path, with their blob ids (none when not looked at). */
  leftOut?: ReadonlyMap<string, string>;
}

export interface Revisions {
  /** The repository as the plan names it: a directory, or a URL without credentials. */
  repository: string;
  base: Revision;
  head: Revision;
  /**
   * A local checkout's fleet files that differ from its HEAD commit (edited, new, deleted, staged or not):
   * the plan reads commits, so these are not in it. Absent for a URL or a bare repository.
   */
  uncommitted?: ChangedFile[];
}

/** The repository or a ref cannot be read: a usage error for the plan command. */
export class RevisionError extends Error {
  override name = "RevisionError";
}

const isRepositoryUrl = (repo: string): boolean => /^https?:\/\//i.test(repo);

/**
 * Reads the fleet files of `base` and `head`. A local directory is read straight from its object store
 * (any ref or commit, working tree ignored); a URL is fetched shallow through the GitSource the service
 * uses, so `base` and `head` are branch names there.
 */
export async function readRevisions(
  repo: string,
  refs: { base: string; head: string },
  selection: FileSelection,
): Promise<Revisions> {
  return isRepositoryUrl(repo) ? readRemote(repo, refs, selection) : readLocal(repo, refs, selection);
}

interface LocalStore {
  fs: typeof fs;
  gitdir: string;
  cache: object;
  /** The checkout's root; absent for a bare repository. */
  worktree?: string;
}

async function readLocal(
  dir: string,
  refs: { base: string; head: string },
  selection: FileSelection,
): Promise<Revisions> {
  const store = await localStore(dir);
  const read = async (ref: string): Promise<Revision> => {
    const commit = await resolveCommit(store, ref);
    return {
      ref,
      commit,
      files: await readFleetTree(store, commit, selection),
      leftOut: await yamlLeftOutOfTree(store, commit, selection),
    };
  };
  const [base, head] = await Promise.all([read(refs.base), read(refs.head)]);
  const uncommitted = store.worktree === undefined ? [] : await uncommittedFiles(store, selection);
  return { repository: dir, base, head, ...(uncommitted.length > 0 && { uncommitted }) };
}

/**
 * The fleet files of the checkout that differ from its HEAD commit, staged or not, untracked ones too
 * (ignored ones not). Read only: the index's stat cache is not refreshed.
 */
async function uncommittedFiles(store: LocalStore, selection: FileSelection): Promise<ChangedFile[]> {
  const filter = createFileFilter(selection);
  const rows = await git.statusMatrix({
    ...store,
    dir: store.worktree!,
    filter: (path) => filter.matches(path),
    refresh: false,
  });
  return rows.flatMap(([path, head, workdir, stage]): ChangedFile[] => {
    if (head === 1 && workdir === 1 && stage === 1) return [];
    const change = head === 0 ? "added" : workdir === 0 ? "removed" : "modified";
    return [{ path, change }];
  });
}

/** The object store of a bare repository, or of the checkout `dir` is in. */
async function localStore(dir: string): Promise<LocalStore> {
  const bare = fs.existsSync(join(dir, "HEAD")) && fs.existsSync(join(dir, "objects"));
  const root = bare ? undefined : await git.findRoot({ fs, filepath: dir }).catch(() => undefined);
  if (!bare && root === undefined) throw new RevisionError(`${dir} is not in a Git repository`);
  return root === undefined
    ? { fs, gitdir: dir, cache: {} }
    : { fs, gitdir: join(root, ".git"), cache: {}, worktree: root };
}

async function resolveCommit(store: LocalStore, ref: string): Promise<string> {
  try {
    return await resolveRevision(store, ref);
  } catch (err) {
    if (err instanceof UnknownRevisionError) throw new RevisionError(err.message);
    throw err;
  }
}

async function readRemote(
  url: string,
  refs: { base: string; head: string },
  selection: FileSelection,
): Promise<Revisions> {
  const cacheDir = await mkdtemp(join(tmpdir(), "knative-fleet-plan-"));
  try {
    const spec = gitSourceSpecSchema.safeParse({
      url,
      branch: refs.base,
      pathGlob: selection.pathGlob,
      statusDir: selection.statusDir,
    });
    if (!spec.success) throw new RevisionError(`${maskText(url)} is not a repository URL (http or https)`);
    const source = new GitSource(spec.data, { cacheDir });
    const read = async (ref: string): Promise<Revision> => {
      const commit = await source.fetch(ref);
      const { files } = await source.snapshot(commit);
      return { ref, commit, files, leftOut: await source.yamlLeftOut(commit) };
    };
    // One after the other: the source's cache takes one fetch at a time.
    const base = await read(refs.base);
    const head = await read(refs.head);
    return { repository: maskText(url), base, head };
  } catch (err) {
    if (err instanceof GitSourceError) throw new RevisionError(maskText(err.message));
    throw err;
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
}
