import { describe, expect, it } from "vitest";
import { createLogger } from "../../../src/observability/log.ts";
import { redactSecrets } from "../../../src/observability/redact.ts";

describe("redactSecrets: the one redaction of text that leaves the process", () => {
  it.each([
    [
      "cannot fetch https://bot:ghp_s3cr3t@git.example/fleet.git: 401",
      "cannot fetch https://<redacted>@git.example/fleet.git: 401",
    ],
    ["clone of http://x-access-token@host:8080/r failed", "clone of http://<redacted>@host:8080/r failed"],
    ['{"url":"https://u:p@h/"}', '{"url":"https://<redacted>@h/"}'],
    ["Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic <redacted>"],
    ['"authorization":"Bearer abc.def"', '"authorization":"Bearer <redacted>"'],
    ["sent Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", "sent Bearer <redacted>"],
    ["token: tok-123 user: me", "token: <redacted> user: me"],
    ['{"password":"hunter2"}', '{"password":"<redacted>"}'],
    ["x -----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY----- y", "x <redacted> y"],
  ])("%j", (text, redacted) => {
    expect(redactSecrets(text)).toBe(redacted);
  });

  it("replaces the exact values it is told are secret", () => {
    expect(redactSecrets("got s3 from s3", ["s3"])).toBe("got <redacted> from <redacted>");
  });

  it("leaves what knative-fleet composes readable: names, paths, digests, commits, identities", () => {
    for (const text of [
      'access provider "secretreader": plugin /access-plugins/kubeconfig-secretreader/bin/kubeconfig-secretreader-plugin exited with code 1',
      'the spoke https://127.0.0.1:6443 refused the bearer token from access provider "secretreader" (401 Unauthorized)',
      'failed to get secret fleet-system/spoke-1: secrets "spoke-1" is forbidden',
      `manifests at https://github.com/knative/serving/releases/download/knative-v1.22.0/serving-core.yaml do not match their sha256 pin (got ${"a".repeat(64)})`,
      `status: fleet summary for ${"0123456789ab".repeat(3)}`,
      "replica-1_550e8400-e29b-41d4-a716-446655440000 joined",
      "repository.credentialsDir /var/run/secrets/knative-fleet/repository holds no token; tokenFile: /x",
      "git@github.com:acme/fleet.git",
      '{"secret": {"secretName": "webhook-certs"}, "token": []}',
      "volumes:\n  - secret:\n      secretName: webhook-certs",
    ]) {
      expect(redactSecrets(text)).toBe(text);
    }
  });
});

describe("the service's log", () => {
  it("redacts messages and string fields, nested ones too", () => {
    const lines: string[] = [];
    const log = createLogger("info", { write: (line: string) => lines.push(line) });
    log.warn(
      { err: "fetch https://bot:hunter2@git.example/f.git failed", nested: { url: "https://u:p@h/x" } },
      "sync of https://bot:hunter2@git.example/f.git failed",
    );
    log.child({ component: "status" }).info("pushed to https://t0k3n@git.example/f.git");
    const text = lines.join("");
    expect(text).not.toMatch(/hunter2|t0k3n|u:p@/);
    expect(text).toContain("https://<redacted>@git.example/f.git");
    expect(JSON.parse(lines[0]!).nested.url).toBe("https://<redacted>@h/x");
  });
});
