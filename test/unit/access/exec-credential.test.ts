import { X509Certificate } from "node:crypto";
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { execCredentialInput, parseExecCredential } from "../../../src/access/exec-credential.ts";
import { testdata } from "./support.ts";

const V1 = "client.authentication.k8s.io/v1";
const V1BETA1 = "client.authentication.k8s.io/v1beta1";
const NOW = new Date("2026-03-01T12:00:00Z");

const output = (status: object, apiVersion = V1) =>
  JSON.stringify({ apiVersion, kind: "ExecCredential", status });

describe("execCredentialInput", () => {
  it("hands the plugin the cluster, non-interactive, in the configured version", () => {
    const cluster = { server: "https://spoke:6443", config: { clusterName: "spoke" } };
    expect(JSON.parse(execCredentialInput(V1BETA1, cluster))).toEqual({
      apiVersion: V1BETA1,
      kind: "ExecCredential",
      spec: { cluster, interactive: false },
    });
  });

  it("leaves the cluster out when provideClusterInfo is off", () => {
    expect(JSON.parse(execCredentialInput(V1, undefined)).spec).toEqual({ interactive: false });
  });
});

describe("parseExecCredential", () => {
  it("reads a token and its expiry, v1 and v1beta1", () => {
    const v1 = parseExecCredential(
      output({ token: "t1", expirationTimestamp: "2026-03-01T13:00:00Z" }),
      V1,
      NOW,
    );
    expect(v1.token).toBe("t1");
    expect(v1.expiresAt).toEqual(new Date("2026-03-01T13:00:00Z"));
    expect(v1.obtainedAt).toBe(NOW);
    expect(parseExecCredential(output({ token: "t2" }, V1BETA1), V1BETA1, NOW).expiresAt).toBeUndefined();
  });

  it("reads a client certificate, which expires at its notAfter when the plugin gives no time", () => {
    const credential = parseExecCredential(
      output({ clientCertificateData: testdata("client.crt"), clientKeyData: testdata("client.key") }),
      V1,
      NOW,
    );
    expect(credential.token).toBeUndefined();
    expect(credential.clientCertificate?.cert).toBe(testdata("client.crt"));
    expect(credential.expiresAt).toEqual(new Date(new X509Certificate(testdata("client.crt")).validTo));
    expect(credential.describe()).toContain("client certificate CN=fixture-client");
  });

  it("never shows the secret parts when printed, logged or serialized", () => {
    const credential = parseExecCredential(
      output({
        token: "s3cret-token",
        clientCertificateData: testdata("client.crt"),
        clientKeyData: testdata("client.key"),
      }),
      V1,
      NOW,
    );
    for (const shown of [inspect(credential), JSON.stringify({ credential }), `${credential.describe()}`]) {
      expect(shown).not.toContain("s3cret-token");
      expect(shown).not.toContain("PRIVATE KEY");
    }
    expect(credential.secrets()).toEqual(["s3cret-token", testdata("client.key")]);
  });

  it.each([
    ["empty output", "", "printed nothing on stdout"],
    [
      "another apiVersion",
      output({ token: "t" }, V1BETA1),
      `answered with apiVersion ${V1BETA1}, but the provider's execConfig.apiVersion is ${V1}`,
    ],
    [
      "another kind",
      JSON.stringify({ apiVersion: V1, kind: "Token", status: { token: "t" } }),
      "kind: invalid input",
    ],
    ["no status", JSON.stringify({ apiVersion: V1, kind: "ExecCredential" }), "status: invalid input"],
    ["nothing usable", output({}), "neither status.token nor status.clientCertificateData"],
    [
      "a certificate without its key",
      output({ clientCertificateData: testdata("client.crt") }),
      "only one of",
    ],
    [
      "a key that is not the certificate's",
      output({ clientCertificateData: testdata("client.crt"), clientKeyData: testdata("server.key") }),
      "the key does not belong to the certificate",
    ],
    [
      "a certificate that is not PEM",
      output({ clientCertificateData: "not pem", clientKeyData: "not pem" }),
      "not a PEM certificate and private key",
    ],
    [
      "a time that is not RFC 3339",
      output({ token: "t", expirationTimestamp: "tomorrow" }),
      '"tomorrow" is not an RFC 3339 time',
    ],
    [
      "a credential that has expired already",
      output({ token: "t", expirationTimestamp: "2026-03-01T11:00:00Z" }),
      "expired at 2026-03-01T11:00:00.000Z",
    ],
  ])("rejects %s", (_what, stdout, message) => {
    expect(() => parseExecCredential(stdout, V1, NOW)).toThrow(message);
  });

  it("does not quote output that is not JSON, which may be a bare token", () => {
    const secret = "eyJhbGciOiJSUzI1NiJ9.bare-token";
    let message = "";
    try {
      parseExecCredential(secret, V1, NOW);
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(
      `stdout (${secret.length} bytes, not shown as it may hold a secret) is not JSON`,
    );
    expect(message).not.toContain("eyJ");
  });
});
