import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTestFinished } from "vitest";
import type { z } from "zod";
import { GitSource, type GitSourceOptions } from "../../../src/source/git-source.ts";
import type { BackoffPolicy } from "../../../src/source/retry.ts";
import { gitSourceSpecSchema } from "../../../src/source/spec.ts";
import { type GitServer, type GitServerOptions, startGitServer } from "../../support/git-server.ts";

/** Retries that keep failure tests fast: 3 tries, a few tens of milliseconds apart. */
export const fastBackoff: BackoffPolicy = { attempts: 3, initialDelayMs: 20, maxDelayMs: 80, factor: 2 };

export const bot = { name: "knative-fleet", email: "knative-fleet@example.com" };

/** A small fleet repository: two clusters, a README, and a status file the bot owns. */
export const fleetFiles: Record<string, string> = {
  "clusters/prod.yaml": "name: prod\nserving: 1.20\n",
  "clusters/eu/west.yml": "name: west\neventing: 1.20\n",
  "README.md": "# fleet\n",
  "status/prod.yaml": "ready: true\n",
};

/** A git server for this test, closed when it ends. */
export async function gitServerForTest(options: GitServerOptions = {}): Promise<GitServer> {
  const server = await startGitServer(options);
  onTestFinished(() => server.close());
  return server;
}

/** A temporary directory for this test, removed when it ends. */
export async function tempDirForTest(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export interface TestSource {
  source: GitSource;
  /** Another GitSource on the same cache, as after a restart. */
  restarted: () => GitSource;
  /** The bare clone the source keeps in its cache directory. */
  gitdir: () => Promise<string>;
}

export async function sourceForTest(
  url: string,
  spec: Partial<z.input<typeof gitSourceSpecSchema>> = {},
  options: Partial<GitSourceOptions> = {},
): Promise<TestSource> {
  const cacheDir = await tempDirForTest("knative-fleet-cache-");
  const create = () =>
    new GitSource(gitSourceSpecSchema.parse({ url, ...spec }), {
      cacheDir,
      pushBackoff: fastBackoff,
      ...options,
    });
  return {
    source: create(),
    restarted: create,
    gitdir: async () => {
      const [only] = await readdir(cacheDir);
      return join(cacheDir, only!);
    },
  };
}
