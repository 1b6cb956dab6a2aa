import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createFileFilter, DEFAULT_FILE_SELECTION } from "../../../src/fleet/select.ts";
import {
  decidePush,
  type PushPayload,
  verifyGitHubSignature,
  verifyGitLabToken,
} from "../../../src/source/webhook.ts";

const secret = "It's a Secret to Everybody";
const body = Buffer.from("Hello, World!");

describe("verifyGitHubSignature", () => {
  it("accepts GitHub's documented example", () => {
    // From GitHub's "Validating webhook deliveries" docs: this secret and body give this signature.
    const documented = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    expect(verifyGitHubSignature(body, documented, secret)).toBe(true);
  });

  it("refuses another secret, another body, a truncated or malformed header", () => {
    const good = `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
    expect(verifyGitHubSignature(body, good, "wrong secret")).toBe(false);
    expect(verifyGitHubSignature(Buffer.from("Hello, World?"), good, secret)).toBe(false);
    expect(verifyGitHubSignature(body, good.slice(0, -1), secret)).toBe(false);
    expect(verifyGitHubSignature(body, good.replace("sha256=", "sha1="), secret)).toBe(false);
    expect(verifyGitHubSignature(body, "", secret)).toBe(false);
  });
});

describe("verifyGitLabToken", () => {
  it("accepts only the exact token", () => {
    expect(verifyGitLabToken(secret, secret)).toBe(true);
    expect(verifyGitLabToken(`${secret} `, secret)).toBe(false);
    expect(verifyGitLabToken("It's", secret)).toBe(false);
    expect(verifyGitLabToken("", secret)).toBe(false);
  });
});

describe("decidePush", () => {
  const filter = createFileFilter(DEFAULT_FILE_SELECTION);
  const push = (commits: PushPayload["commits"], extra: Partial<PushPayload> = {}): PushPayload => ({
    ref: "refs/heads/main",
    after: "abc",
    commits,
    ...extra,
  });
  const changes = (modified: string[], added: string[] = [], removed: string[] = []) => ({
    added,
    removed,
    modified,
  });

  it("syncs a push that changes a fleet file, however it changes it", () => {
    expect(decidePush(push([changes(["clusters/prod.yaml"])]), "main", filter)).toEqual({ sync: true });
    expect(decidePush(push([changes([], ["clusters/new.yml"])]), "main", filter)).toEqual({ sync: true });
    expect(decidePush(push([changes([], [], ["clusters/gone.yaml"])]), "main", filter)).toEqual({
      sync: true,
    });
  });

  it("ignores the bot's status-only commits", () => {
    const decision = decidePush(
      push([changes(["status/prod.yaml"]), changes([], ["status/eu.yaml"])]),
      "main",
      filter,
    );
    expect(decision).toEqual({ sync: false, reason: "no fleet file changed" });
  });

  it("syncs when any of the pushed commits touches the fleet", () => {
    const commits = [changes(["status/prod.yaml"]), changes(["clusters/prod.yaml"])];
    expect(decidePush(push(commits), "main", filter)).toEqual({ sync: true });
  });

  it("ignores pushes to other branches", () => {
    const decision = decidePush(
      push([changes(["clusters/a.yaml"])], { ref: "refs/heads/dev" }),
      "main",
      filter,
    );
    expect(decision).toEqual({ sync: false, reason: "push to refs/heads/dev" });
    expect(decidePush(push([], { ref: "refs/tags/v1" }), "main", filter).sync).toBe(false);
  });

  it("syncs whenever the payload cannot prove the fleet unchanged", () => {
    const statusOnly = [changes(["status/prod.yaml"])];
    expect(decidePush(push([]), "main", filter).sync).toBe(true); // branch deleted or created empty
    expect(decidePush(push(statusOnly, { forced: true }), "main", filter).sync).toBe(true);
    expect(decidePush(push(statusOnly, { total_commits_count: 25 }), "main", filter).sync).toBe(true);
    expect(decidePush(push(Array(2048).fill(statusOnly[0])), "main", filter).sync).toBe(true);
  });
});
