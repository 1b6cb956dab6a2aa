import { execFile } from "node:child_process";
import { mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";

// Real Git repositories of fleet files, for the plan's tests and scripts/bench-plan.ts (no vitest here).

const execFileAsync = promisify(execFile);

/** A real Git repository in a temporary directory. */
export interface FleetRepo {
  dir: string;
  /**
   * Commits the files (path -> text, null deletes) on `branch`, created from main when new;
   * returns the commit.
   */
  commit(branch: string, files: Record<string, string | null>): Promise<string>;
}

/** A fleet repository in a new temporary directory; the caller removes it. */
export async function createFleetRepo(): Promise<FleetRepo> {
  const dir = await mkdtemp(join(tmpdir(), "knative-fleet-plan-repo-"));
  const git = async (...args: string[]) =>
    (
      await execFileAsync("git", ["-c", "user.name=Ada", "-c", "user.email=ada@example.com", ...args], {
        cwd: dir,
      })
    ).stdout.trim();
  await git("init", "--quiet", "--initial-branch=main");
  return {
    dir,
    async commit(branch, files) {
      const exists = await git("rev-parse", "--verify", "--quiet", `refs/heads/${branch}`).catch(() => "");
      const current = await git("rev-parse", "--abbrev-ref", "HEAD").catch(() => "main");
      if (current !== branch)
        await git("checkout", "--quiet", ...(exists ? [branch] : ["-b", branch, "main"]));
      for (const [path, text] of Object.entries(files)) {
        if (text === null) await git("rm", "--quiet", path);
        else {
          await mkdir(dirname(join(dir, path)), { recursive: true });
          await writeFile(join(dir, path), text);
          await git("add", path);
        }
      }
      await git("commit", "--quiet", "--allow-empty", "-m", `change ${branch}`);
      return git("rev-parse", "HEAD");
    },
  };
}
