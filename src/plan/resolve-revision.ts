import type * as fs from "node:fs";
import git from "isomorphic-git";
import { commitInMessage } from "../text/commit.ts";
import { count } from "../text/count.ts";

/** Where a revision is looked up: a repository's object store. */
interface RevisionStore {
  fs: typeof fs;
  gitdir: string;
  cache: object;
}

/** The revision is not one this resolver reads, or names nothing in the repository. */
export class UnknownRevisionError extends Error {
  override name = "UnknownRevisionError";
}

/**
 * The commit a revision names, like `git rev-parse REV^{commit}` for the forms users type for --base and
 * --head: a ref (`main`, `origin/main`, `v1.2`, `refs/...`, `HEAD`, `@`), a full or abbreviated commit id,
 * each followed by any of `~N`, `^N`, `~`, `^` and a final `^{commit}` or `^{}`. Implemented on the object
 * store itself (isomorphic-git resolves refs but not ancestry), so the image, which has no git CLI, reads
 * the same revisions as a developer's machine. Reflog (`@{1}`), search (`:/text`) and range forms are refused.
 */
export async function resolveRevision(store: RevisionStore, revision: string): Promise<string> {
  const parsed = parseRevision(revision);
  let commit = await peelToCommit(store, await resolveName(store, parsed.name, revision), revision);
  for (const step of parsed.steps) {
    for (let i = 0; i < step.count; i++) {
      const { commit: object } = await git.readCommit({ ...store, oid: commit });
      const index = step.kind === "~" ? 0 : step.parent - 1;
      const parent = object.parent[index];
      if (parent === undefined) {
        throw new UnknownRevisionError(
          object.parent.length === 0
            ? `${revision}: commit ${commitInMessage(commit)} has no parent (in a shallow clone, fetch more history, e.g. fetch-depth: 0)`
            : `${revision}: commit ${commitInMessage(commit)} has only ${count(object.parent.length, "parent")}`,
        );
      }
      commit = await peelToCommit(store, parent, revision);
    }
  }
  return commit;
}

type Step = { kind: "~"; count: number } | { kind: "^"; parent: number; count: number };

const SUFFIX = /(~(\d*)|\^(\d*))$/;
const PEEL = /\^\{(commit)?\}$/;

/** Splits `name~2^2^{commit}` into its name and ancestry steps, in order. */
export function parseRevision(revision: string): { name: string; steps: Step[] } {
  if (revision === "" || revision.startsWith("-") || /\s|\.\.|@\{|:/.test(revision)) {
    throw new UnknownRevisionError(
      `"${revision}" is not a revision this command reads: use a branch, tag, remote branch (origin/main), ` +
        "commit id, or one of those followed by ~N or ^N",
    );
  }
  let rest = revision.replace(PEEL, "");
  const steps: Step[] = [];
  for (let match = SUFFIX.exec(rest); match !== null && match.index > 0; match = SUFFIX.exec(rest)) {
    const [, , tilde, caret] = match;
    steps.unshift(
      tilde !== undefined
        ? { kind: "~", count: tilde === "" ? 1 : Number(tilde) }
        : caret === "0"
          ? { kind: "~", count: 0 }
          : { kind: "^", parent: caret === "" ? 1 : Number(caret), count: 1 },
    );
    rest = rest.slice(0, match.index);
  }
  if (/[~^{}]/.test(rest)) {
    throw new UnknownRevisionError(`"${revision}": cannot read the revision syntax in "${rest}"`);
  }
  return { name: rest === "@" ? "HEAD" : rest, steps };
}

/** A ref (expanded the way git does: refs/, refs/tags/, refs/heads/, refs/remotes/), else an object id prefix. */
async function resolveName(store: RevisionStore, name: string, revision: string): Promise<string> {
  try {
    return await git.resolveRef({ ...store, ref: name });
  } catch {
    if (/^[0-9a-f]{4,40}$/i.test(name)) {
      try {
        return await git.expandOid({ ...store, oid: name.toLowerCase() });
      } catch (err) {
        if ((err as { code?: string }).code === "AmbiguousError") {
          throw new UnknownRevisionError(
            `${revision}: the short commit id ${name} is ambiguous; give more digits`,
          );
        }
      }
    }
    throw new UnknownRevisionError(
      `no commit "${name}"${name === revision ? "" : ` (in ${revision})`} in ${store.gitdir}: no branch, tag or ` +
        "commit id of that name; fetch it first (a CI checkout needs the base branch's history, e.g. fetch-depth: 0)",
    );
  }
}

/** An annotated tag's commit; a commit itself. */
async function peelToCommit(store: RevisionStore, oid: string, revision: string): Promise<string> {
  try {
    // readCommit peels annotated tags.
    return (await git.readCommit({ ...store, oid })).oid;
  } catch {
    throw new UnknownRevisionError(
      `${revision}: object ${commitInMessage(oid)} is not a commit in ${store.gitdir}, or is missing (a shallow clone?)`,
    );
  }
}
