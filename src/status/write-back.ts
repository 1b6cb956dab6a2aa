import { posix } from "node:path";
import { normalizeRepoPath } from "../fleet/select.ts";
import type { KubeClient } from "../kube/client.ts";
import { listHubResources } from "../mirror/mirror.ts";
import type { Logger } from "../observability/log.ts";
import type { StatusCommitOutcome } from "../observability/metrics.ts";
import { redactSecrets } from "../observability/redact.ts";
import { blobIdOf, type CommitBase, type GitSource } from "../source/index.ts";
import { commitInMessage } from "../text/commit.ts";
import { SyncReport } from "./coalesce.ts";
import {
  CLUSTER_INDEX,
  clusterPagesListed,
  renderStatusSummary,
  type StatusFile,
  type StatusSync,
  statusFileHead,
} from "./summary.ts";

/**
 * Why `path` cannot be the status folder of a repository whose fleet files `pathGlob` selects, or
 * undefined. The status files replace whatever is at `<path>/README.md` and `<path>/fleet.yaml` (and, for a
 * big fleet, the clusters' pages under `<path>/clusters/`), and nothing under `path` is read as desired state: the repository root would lose its README, and a folder
 * that holds the fleet's folders would hide every fleet file (and the mirror would prune their CRs).
 */
export function statusPathProblem(path: string, pathGlob: string): string | undefined {
  const folder = normalizeRepoPath(path).replace(/\/+$/, "");
  const segments = folder.split("/");
  if (folder === "" || folder === "." || path.startsWith("/") || segments.includes("..")) {
    return (
      `status.path ${JSON.stringify(path)} is the repository root or outside it: the status files would ` +
      "overwrite the root's README.md; name a folder of its own, such as status/"
    );
  }
  // The literal folders the glob starts with: `clusters/**/*.yaml` reads only under `clusters/`.
  const glob = normalizeRepoPath(pathGlob).split("/");
  const literal = glob
    .slice(
      0,
      Math.max(
        0,
        glob.findIndex((segment) => /[*?[{]/.test(segment)),
      ),
    )
    .join("/");
  if (literal === folder || literal.startsWith(`${folder}/`)) {
    return (
      `status.path ${JSON.stringify(path)} holds every folder repository.pathGlob (${pathGlob}) reads fleet ` +
      "files from: nothing under it counts as desired state, so every fleet file would be ignored; name a " +
      "folder of its own, such as status/"
    );
  }
  return undefined;
}

/** A status file's path holds a file the write-back did not write: it is left alone, and so is the commit. */
class StatusPathTakenError extends Error {
  override name = "StatusPathTakenError";
}

/** The StatusWriter's settings a config file holds. */
export interface StatusWriteBack {
  /** Folder in the repository, e.g. `status/`. */
  path: string;
  /** The fleet branch, or a separate one. */
  branch: string;
  author: { name: string; email: string };
  intervalMs: number;
}

interface StatusWriterOptions {
  source: GitSource;
  hub: KubeClient;
  /** Folder in the repository, e.g. `status/`. */
  path: string;
  /** Branch the status goes to (the fleet branch, or a separate one). */
  branch: string;
  author: { name: string; email: string };
  /** At most one commit per interval; changes in between are coalesced into the next one. */
  intervalMs: number;
  log: Logger;
  onCommitted?(outcome: StatusCommitOutcome): void;
}

/**
 * The status files at their paths, checked against the branch head: none replaces a file not ours. The
 * clusters' pages the head's index lists that these files do not have (a cluster gone, a fleet that no
 * longer summarizes) are deleted: those paths only, and each only if it is ours.
 */
export async function statusChanges(
  base: CommitBase,
  path: string,
  files: readonly StatusFile[],
): Promise<Map<string, string | null>> {
  const at = (name: string) => posix.join(path, name);
  const ours = (name: string, text: string) => text.startsWith(statusFileHead(name) ?? "");
  // A big fleet has a page per cluster, most of them as the last commit left them: a file whose blob id
  // is that of its new content is ours already, and only the others are read.
  const contents = files.map((file) => redactSecrets(file.content));
  const ids = await Promise.all(files.map((file) => base.blobId(at(file.name))));
  const changed = files.filter((_, i) => ids[i] !== null && ids[i] !== blobIdOf(contents[i]!));
  const texts = await Promise.all(changed.map((file) => base.readFile(at(file.name))));
  changed.forEach((file, i) => {
    const text = texts[i];
    if (text != null && !ours(file.name, text)) {
      throw new StatusPathTakenError(
        `status.path ${path}: ${at(file.name)} exists and was not written by knative-fleet; ` +
          "the status is not committed until status.path names a folder of its own",
      );
    }
  });
  const changes = new Map(files.map((file, i): [string, string | null] => [at(file.name), contents[i]!]));
  const index = await base.readFile(at(CLUSTER_INDEX));
  if (index === null || !ours(CLUSTER_INDEX, index)) return changes;
  const gone = [...clusterPagesListed(index), CLUSTER_INDEX].filter((name) => !changes.has(at(name)));
  const stale = await Promise.all(gone.map((name) => base.readFile(at(name))));
  gone.forEach((name, i) => {
    const text = stale[i];
    if (text != null && ours(name, text)) changes.set(at(name), null);
  });
  return changes;
}

/**
 * Commits the fleet's status summary back to Git: only when its content changed (the summary has no
 * timestamps), at most once per interval, pushed with fetch-rebuild-retry by the source (a person's
 * concurrent commit is never lost, never force-pushed over). The status files are outside the fleet globs,
 * so the status commit triggers no sync.
 */
export class StatusWriter extends SyncReport {
  private readonly options: StatusWriterOptions;

  constructor(options: StatusWriterOptions) {
    super(options.intervalMs);
    this.options = options;
  }

  /** One write-back; throws (after reporting) when it is to be tried again. */
  protected async send(sync: StatusSync): Promise<void> {
    const { source, hub, branch, author, log } = this.options;
    try {
      const files = renderStatusSummary({ resources: await listHubResources(hub), sync });
      const result = await source.commitAndPush({
        files: (base) => statusChanges(base, this.options.path, files),
        message: `status: fleet summary for ${commitInMessage(sync.source.commit)}`,
        author,
        branch,
      });
      log.info(
        { commit: result.commit, pushed: result.pushed, attempts: result.attempts },
        result.pushed ? "status committed" : "status unchanged",
      );
      this.options.onCommitted?.(result.pushed ? "pushed" : "unchanged");
    } catch (err) {
      const message = redactSecrets((err as Error).message);
      if (err instanceof StatusPathTakenError) log.error({ err: message }, "status write-back refused");
      else log.warn({ err: message }, "status write-back failed; retrying later");
      this.options.onCommitted?.("failed");
      throw err; // retried with the next run
    }
  }
}
