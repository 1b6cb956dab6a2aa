import { describe, expect, it } from "vitest";
import { pluginStderrLine, redactCredentials } from "../../../src/access/plugin-stderr.ts";

describe("redactCredentials", () => {
  it.each([
    ["Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic <redacted>"],
    ["sending bearer abc.def", "sending bearer <redacted>"],
    ['{"token":"short-one","user":"me"}', '{"token":"<redacted>","user":"me"}'],
    ["password=hunter2 user=me", "password=<redacted> user=me"],
    ["x -----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE----- y", "x <redacted> y"],
    ["key -----BEGIN RSA PRIVATE KEY----- MIIEow", "key <redacted>"],
    [`opaque ${"a1B2".repeat(10)} end`, "opaque <redacted> end"],
    // A token with "/" in it is still a token; only lower-case names joined by "/" are a path.
    [`opaque ${"a1/B2".repeat(8)} end`, "opaque <redacted> end"],
    [`opaque ${"a1/b2".repeat(8)}== end`, "opaque <redacted> end"],
  ])("%j", (text, redacted) => {
    expect(redactCredentials(text)).toBe(redacted);
  });

  it("replaces the exact values it is told are secret", () => {
    expect(redactCredentials("got tok-1 from tok-1", ["tok-1"])).toBe("got <redacted> from <redacted>");
  });

  it("keeps ordinary diagnostics readable", () => {
    const text = 'failed to get secret fleet-system/spoke-1: secrets "spoke-1" is forbidden';
    expect(redactCredentials(text)).toBe(text);
  });

  it("keeps the Secret path an operator needs to fix a mapping, however long", () => {
    for (const text of [
      "Error: get secret open-cluster-management-credentials/cluster1-fleet-admin: not found",
      "GET https://hub:6443/api/v1/namespaces/fleet-credentials-team-a/secrets/cluster1-kubeconfig 404",
    ])
      expect(redactCredentials(text)).toBe(text);
  });
});

describe("pluginStderrLine", () => {
  it("picks the Error: line over a usage banner printed after it", () => {
    expect(pluginStderrLine("Error: no cluster\nUsage:\n  plugin [flags]\n")).toBe("Error: no cluster");
  });

  it("picks a Go panic's first line", () => {
    expect(pluginStderrLine("panic: kubeconfig missing\n\ngoroutine 1 [running]:\nmain.main()\n")).toBe(
      "panic: kubeconfig missing",
    );
  });

  it("falls back to the last line", () => {
    expect(pluginStderrLine("starting\nall went wrong here\n")).toBe("all went wrong here");
  });
});
