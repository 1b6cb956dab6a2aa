import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import type { CommitAndPushRequest, CommitBase, GitSource } from "../../../src/source/index.ts";
import type { StatusSync } from "../../../src/status/summary.ts";
import { StatusWriter } from "../../../src/status/write-back.ts";
import { FakeKube } from "../../support/fake-kube.ts";

const MIRROR: StatusSync = {
  source: { repository: "https://git.example/fleet.git", branch: "main", commit: "c".repeat(40) },
  resources: [
    {
      kind: "KnativeServing",
      namespace: "knative-fleet",
      name: "serving",
      path: "clusters/serving.yaml",
      action: "refused",
      error: "cannot fetch https://bot:ghp_token@git.example/x.git: 401",
    },
  ],
  prune: { state: "none", candidates: [], retained: [] },
  diagnostics: [],
  failedFiles: [],
};

/** A GitSource whose branch head holds `files`; it records what a status commit would write. */
function sourceHolding(files: Record<string, string>) {
  const written: Map<string, string>[] = [];
  const base: CommitBase = { commit: "h".repeat(40), readFile: async (path) => files[path] ?? null };
  const source = {
    async commitAndPush(request: CommitAndPushRequest) {
      const changes = typeof request.files === "function" ? await request.files(base) : request.files;
      written.push(changes as Map<string, string>);
      return { pushed: true, commit: "n".repeat(40), attempts: 1 };
    },
  } as unknown as GitSource;
  return { source, written };
}

function writer(path: string, source: GitSource, outcomes: string[]) {
  const hub = new FakeKube().serveKindsOf(
    KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
  );
  return new StatusWriter({
    source,
    hub: hub.client,
    path,
    branch: "main",
    author: { name: "knative-fleet", email: "knative-fleet@noreply.invalid" },
    intervalMs: 0,
    log: silentLogger,
    onCommitted: (outcome) => outcomes.push(outcome),
  });
}

describe("the status write-back", () => {
  it("never overwrites a file it did not write: a README or a fleet file at a status file's path", async () => {
    for (const [path, files] of [
      ["docs/", { "docs/README.md": "# Our docs\n" }],
      ["clusters/eu/", { "clusters/eu/fleet.yaml": "apiVersion: operator.knative.dev/v1beta1\n" }],
    ] as const) {
      const { source, written } = sourceHolding(files);
      const outcomes: string[] = [];
      const status = writer(path, source, outcomes);
      status.synced(MIRROR);
      await status.flush();
      expect(written).toEqual([]);
      expect(outcomes).toEqual(["failed"]);
    }
  });

  it("replaces its own files, and commits no credential that an error message carried", async () => {
    const { source, written } = sourceHolding({
      "status/README.md": "# Fleet status\n\nold\n",
      "status/fleet.yaml":
        "# Written by knative-fleet from the hub after each sync; edits here are overwritten.\nold: 1\n",
    });
    const outcomes: string[] = [];
    const status = writer("status/", source, outcomes);
    status.synced(MIRROR);
    await status.flush();
    expect(outcomes).toEqual(["pushed"]);
    const files = written[0]!;
    expect([...files.keys()]).toEqual(["status/README.md", "status/fleet.yaml"]);
    for (const content of files.values()) {
      expect(content).toContain("https://<redacted>@git.example/x.git");
      expect(content).not.toContain("ghp_token");
    }
  });
});
