import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { type Logger, pino } from "pino";
import { afterAll } from "vitest";
import type { AccessProviderConfig, ProviderConfig } from "../../../src/access/provider-config.ts";
import type { ClusterProfile } from "../../../src/api/clusterprofile.ts";
import { clientExtensions, createCa, serverExtensions, signedCert } from "../../sandbox/pki.ts";

// Test PKI, made with openssl once per test file (no key material is kept in the repository): a CA with a
// serving certificate (127.0.0.1, localhost, spoke.fixture.invalid) and a client certificate it signed,
// plus an unrelated CA (other-ca.crt).
const testdataDir = mkdtempSync(join(tmpdir(), "knative-fleet-access-pki-"));
createCa(testdataDir, "fixture-ca");
signedCert(
  testdataDir,
  "server",
  "/CN=spoke.fixture.invalid",
  serverExtensions(["DNS:localhost", "IP:127.0.0.1", "DNS:spoke.fixture.invalid"]),
);
signedCert(testdataDir, "client", "/CN=fixture-client", clientExtensions);
mkdirSync(join(testdataDir, "other"));
createCa(join(testdataDir, "other"), "unrelated-ca");
copyFileSync(join(testdataDir, "other", "ca.crt"), join(testdataDir, "other-ca.crt"));
process.on("exit", () => rmSync(testdataDir, { recursive: true, force: true }));

export const testdataPath = (name: string): string => join(testdataDir, name);
export const testdata = (name: string): string => readFileSync(testdataPath(name), "utf8");
export const base64 = (text: string): string => Buffer.from(text, "utf8").toString("base64");

export const silentLogger: Logger = pino({ level: "silent" });

/** A temporary directory removed once the calling test file is done; call it at the file's top level. */
export function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "knative-fleet-access-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A logger that keeps every line it writes, parsed, for tests that check what reaches the log. */
export function capturingLogger(): {
  logger: Logger;
  lines: () => Record<string, unknown>[];
  text: () => string;
} {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const logger = pino({ level: "debug" }, sink);
  const text = () => chunks.join("");
  return {
    logger,
    text,
    lines: () =>
      text()
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

export function provider(name: string, overrides: Partial<AccessProviderConfig> = {}): AccessProviderConfig {
  return {
    name,
    execConfig: {
      apiVersion: "client.authentication.k8s.io/v1",
      command: `/plugins/${name}`,
      args: [],
      env: [],
      provideClusterInfo: true,
    },
    profileSourcedCLIArgsPolicy: "Ignore",
    profileSourcedEnvVarsPolicy: "Ignore",
    ...overrides,
  };
}

export const providerConfig = (...providers: AccessProviderConfig[]): ProviderConfig => ({
  path: "/etc/fleet/providers.json",
  providers,
});

type ProfileStatus = NonNullable<ClusterProfile["status"]>;

/** A healthy ClusterProfile fleet-system/<name> offering `accessProviders` (default: secretreader). */
export function clusterProfile(name: string, status: Partial<ProfileStatus> = {}): ClusterProfile {
  return {
    apiVersion: "multicluster.x-k8s.io/v1alpha1",
    kind: "ClusterProfile",
    metadata: { name, namespace: "fleet-system" },
    spec: { clusterManager: { name: "test" } },
    status: {
      conditions: [
        {
          type: "ControlPlaneHealthy",
          status: "True",
          reason: "Healthy",
          message: "ok",
          lastTransitionTime: "2026-01-01T00:00:00Z",
        },
      ],
      accessProviders: [
        {
          name: "secretreader",
          cluster: {
            server: "https://spoke.example:6443",
            "certificate-authority-data": base64(testdata("ca.crt")),
            extensions: [{ name: "client.authentication.k8s.io/exec", extension: { clusterName: name } }],
          },
        },
      ],
      ...status,
    },
  };
}
