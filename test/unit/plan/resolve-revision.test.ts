import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseRevision, resolveRevision, UnknownRevisionError } from "../../../src/plan/resolve-revision.ts";

// The revisions users type for --base/--head, checked against what `git rev-parse` itself answers.
describe("resolveRevision", () => {
  let dir: string;
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=Ada", "-c", "user.email=ada@example.com", ...args], {
      cwd: dir,
      encoding: "utf8",
    }).trim();
  const store = () => ({ fs, gitdir: join(dir, ".git"), cache: {} });
  const commit = (file: string, text: string) => {
    writeFileSync(join(dir, file), text);
    git("add", file);
    git("commit", "--quiet", "-m", `${file}: ${text}`);
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "knative-fleet-revisions-"));
    git("init", "--quiet", "--initial-branch=main");
    for (let i = 1; i <= 4; i++) commit("a.yaml", `a${i}`);
    git("tag", "v1.0");
    git("tag", "-a", "-m", "release", "v1.1", "HEAD~1");
    git("checkout", "--quiet", "-b", "feature", "HEAD~2");
    commit("b.yaml", "b1");
    git("checkout", "--quiet", "main");
    git("merge", "--quiet", "--no-ff", "-m", "merge feature", "feature");
    commit("a.yaml", "a5");
    // What a CI checkout has: the base branch as a remote-tracking ref.
    git("update-ref", "refs/remotes/origin/main", "main~1");
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const revisions = [
    "HEAD",
    "@",
    "main",
    "HEAD~1",
    "HEAD~",
    "HEAD^",
    "HEAD~1^2",
    "HEAD^^2~1",
    "HEAD~1^1~2",
    "HEAD^0",
    "main~4",
    "feature",
    "feature~1",
    "origin/main",
    "origin/main^2",
    "refs/remotes/origin/main~1",
    "v1.0",
    "v1.1",
    "v1.1^{}",
    "v1.1~1",
    "v1.0^{commit}",
    "refs/heads/main",
    "refs/tags/v1.1",
  ];
  it.each(revisions)("%s resolves to the commit git rev-parse names", async (revision) => {
    expect(await resolveRevision(store(), revision)).toBe(
      git("rev-parse", "--verify", `${revision}^{commit}`),
    );
  });

  it("reads full and abbreviated commit ids, in either case", async () => {
    const full = git("rev-parse", "HEAD~2");
    for (const id of [full, full.slice(0, 7), full.slice(0, 12).toUpperCase(), `${full.slice(0, 8)}~1`]) {
      expect(await resolveRevision(store(), id), id).toBe(
        git("rev-parse", "--verify", `${id.toLowerCase()}^{commit}`),
      );
    }
  });

  it.each([
    ["nosuchbranch", /no commit "nosuchbranch" in .*no branch, tag or commit id of that name/],
    ["origin/nosuch~1", /no commit "origin\/nosuch" \(in origin\/nosuch~1\)/],
    ["HEAD~40", /has no parent.*fetch-depth/],
    ["HEAD~1^3", /HEAD~1\^3: commit [0-9a-f]{12} has only 2 parents/],
    ["main..feature", /not a revision this command reads/],
    ["main@{1}", /not a revision this command reads/],
    ["--all", /not a revision this command reads/],
    [":/a5", /not a revision this command reads/],
    ["", /not a revision this command reads/],
    ["deadbeef", /no commit "deadbeef"/],
  ])("refuses %s with a clear error", async (revision, message) => {
    const error = await resolveRevision(store(), revision).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(UnknownRevisionError);
    expect((error as Error).message).toMatch(message);
  });

  it("splits ancestry steps in order", () => {
    expect(parseRevision("v1.2~3^2^{commit}")).toEqual({
      name: "v1.2",
      steps: [
        { kind: "~", count: 3 },
        { kind: "^", parent: 2, count: 1 },
      ],
    });
  });
});
