import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import {
  blobIdOf,
  type CommitAndPushRequest,
  type CommitBase,
  type GitSource,
} from "../../../src/source/index.ts";
import { type StatusSync, SUMMARY_ABOVE_CLUSTERS } from "../../../src/status/summary.ts";
import { StatusWriter } from "../../../src/status/write-back.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { hubCr, ready } from "./hub-crs.ts";

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
  const read: string[] = [];
  const base: CommitBase = {
    commit: "h".repeat(40),
    readFile: async (path) => {
      read.push(path);
      return files[path] ?? null;
    },
    blobId: async (path) => (path in files ? blobIdOf(files[path]!) : null),
  };
  const source = {
    async commitAndPush(request: CommitAndPushRequest) {
      const changes = typeof request.files === "function" ? await request.files(base) : request.files;
      written.push(changes as Map<string, string>);
      return { pushed: true, commit: "n".repeat(40), attempts: 1 };
    },
  } as unknown as GitSource;
  return { source, written, read };
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

describe("the status write-back of a big fleet", () => {
  const CLUSTERS = SUMMARY_ABOVE_CLUSTERS + 1;
  const names = Array.from({ length: CLUSTERS }, (_, i) => `c-${String(i).padStart(3, "0")}`);
  const page = (cluster: string) => `status/clusters/fleet-system/${cluster}.md`;
  const hubOf = (clusters: readonly string[]) => {
    const hub = new FakeKube().serveKindsOf(
      KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
    );
    for (const cluster of clusters) hub.put(hubCr(`${cluster}-serving`, { cluster, conditions: ready }));
    return hub;
  };
  const writerOn = (hub: FakeKube, source: GitSource, outcomes: string[]) =>
    new StatusWriter({
      source,
      hub: hub.client,
      path: "status/",
      branch: "main",
      author: { name: "knative-fleet", email: "knative-fleet@noreply.invalid" },
      intervalMs: 0,
      log: silentLogger,
      onCommitted: (outcome) => outcomes.push(outcome),
    });
  /** The clusters' index a status commit left, listing these pages (paths inside status/clusters/). */
  const index = (...links: string[]) =>
    `# Fleet status by cluster\n\n| Cluster |\n| --- |\n${links.map((l) => `| [x](${l}) |`).join("\n")}\n`;

  it("writes a page per cluster, and deletes the pages its last index listed that are gone: its own only", async () => {
    const { source, written } = sourceHolding({
      "status/clusters/README.md": index(
        "fleet-system/c-000.md",
        "fleet-system/gone.md",
        "fleet-system/theirs.md",
        "fleet-system/missing.md",
        "../../clusters/prod.md",
        "../fleet.yaml",
      ),
      [page("c-000")]: "# Cluster status\n\nold\n",
      [page("gone")]: "# Cluster status\n\nold\n",
      [page("theirs")]: "# Our notes on this cluster\n",
      "clusters/prod.md": "# Cluster status\n",
    });
    const outcomes: string[] = [];
    const status = writerOn(hubOf(names), source, outcomes);
    status.synced(MIRROR);
    await status.flush();
    expect(outcomes).toEqual(["pushed"]);
    const changes = written[0]!;
    expect(changes.size).toBe(CLUSTERS + 4);
    for (const cluster of names)
      expect(changes.get(page(cluster)), cluster).toContain(`**fleet-system/${cluster}**`);
    expect(changes.get("status/clusters/README.md")).toContain("](fleet-system/c-000.md)");
    expect(changes.get(page("gone"))).toBeNull();
    for (const left of [page("theirs"), page("missing"), "clusters/prod.md", "status/fleet.yaml"])
      expect(changes.get(left), left).not.toBeNull();
  });

  it("reads only the pages whose content changed since the last commit, which it checks are its own", async () => {
    const first = sourceHolding({});
    const hub = hubOf(names);
    const status = writerOn(hub, first.source, []);
    status.synced(MIRROR);
    await status.flush();
    const committed = Object.fromEntries(first.written[0]!);
    // The next write-back, on the commit the first made: one page no longer as it would be written now.
    const { source, written, read } = sourceHolding({
      ...committed,
      [page("c-003")]: "# Cluster status\n\nold\n",
    });
    const outcomes: string[] = [];
    const next = writerOn(hub, source, outcomes);
    next.synced(MIRROR);
    await next.flush();
    expect(outcomes).toEqual(["pushed"]);
    expect(read.filter((path) => path.startsWith("status/clusters/fleet-system/"))).toEqual([page("c-003")]);
    expect(written[0]!.get(page("c-003"))).toBe(committed[page("c-003")]);
    expect(written[0]!.size).toBe(first.written[0]!.size);
  });

  it("deletes its index and every page once the fleet no longer summarizes", async () => {
    const { source, written } = sourceHolding({
      "status/clusters/README.md": index("fleet-system/c-000.md", "fleet-system/c-001.md"),
      [page("c-000")]: "# Cluster status\n",
      [page("c-001")]: "# Cluster status\n",
    });
    const status = writerOn(hubOf(names.slice(0, 2)), source, []);
    status.synced(MIRROR);
    await status.flush();
    expect(written[0]).toEqual(
      new Map<string, string | null>([
        ["status/README.md", expect.stringContaining("CRs on the hub: 2;")],
        ["status/fleet.yaml", expect.any(String)],
        [page("c-000"), null],
        [page("c-001"), null],
        ["status/clusters/README.md", null],
      ]),
    );
  });

  it("commits nothing while a page's path holds a file it did not write", async () => {
    for (const taken of [
      { [page("c-007")]: "# Our notes\n" },
      { "status/clusters/README.md": "# Clusters\n" },
    ]) {
      const { source, written } = sourceHolding(taken);
      const outcomes: string[] = [];
      const status = writerOn(hubOf(names), source, outcomes);
      status.synced(MIRROR);
      await status.flush();
      expect(written).toEqual([]);
      expect(outcomes).toEqual(["failed"]);
    }
  });
});
