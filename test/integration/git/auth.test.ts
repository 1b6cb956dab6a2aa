import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it, onTestFinished } from "vitest";
import { GitSourceError } from "../../../src/source/errors.ts";
import { fleetFiles, gitServerForTest, sourceForTest, tempDirForTest } from "./fixtures.ts";

const execFileAsync = promisify(execFile);

/** Sets an environment variable for this test only. */
function envForTest(name: string, value: string): void {
  process.env[name] = value;
  onTestFinished(() => {
    delete process.env[name];
  });
}

const isKind = (kind: string) => (error: unknown) => error instanceof GitSourceError && error.kind === kind;

describe("credentials", () => {
  it("sends basic credentials read from a file, and fetches and pushes with them", async () => {
    const server = await gitServerForTest({ auth: { username: "fleet-bot", password: "hunter2" } });
    const head = await server.createRepo("fleet", fleetFiles);
    const secrets = await tempDirForTest("secrets-");
    await writeFile(join(secrets, "password"), "hunter2\n"); // as mounted from a Secret, newline included
    const { source } = await sourceForTest(server.url("fleet"), {
      auth: { type: "basic", username: "fleet-bot", password: { file: join(secrets, "password") } },
    });

    server.resetRequests();
    expect(await source.headOf()).toBe(head);
    expect((await source.sync()).commit).toBe(head);
    const result = await source.commitAndPush({
      files: new Map([["status/prod.yaml", "ready: false\n"]]),
      message: "status",
      author: { name: "bot", email: "bot@example.com" },
    });
    expect(result.pushed).toBe(true);
    // Credentials go with the first request: no 401 round trips.
    expect(server.requests.every((r) => r.status === 200)).toBe(true);
  });

  it("sends a bearer token read from an environment variable", async () => {
    const server = await gitServerForTest({ auth: { token: "t0ken" } });
    const head = await server.createRepo("fleet", fleetFiles);
    envForTest("KNATIVE_FLEET_TEST_TOKEN", "t0ken");
    const { source } = await sourceForTest(server.url("fleet"), {
      auth: { type: "bearer", token: { env: "KNATIVE_FLEET_TEST_TOKEN" } },
    });
    expect((await source.sync()).commit).toBe(head);
  });

  it("types refused, missing and unavailable credentials as auth, and never shows the secret", async () => {
    const server = await gitServerForTest({ auth: { username: "fleet-bot", password: "hunter2" } });
    await server.createRepo("fleet", fleetFiles);
    envForTest("KNATIVE_FLEET_TEST_PASSWORD", "wrong-password");
    const wrong = await sourceForTest(server.url("fleet"), {
      auth: { type: "basic", username: "fleet-bot", password: { env: "KNATIVE_FLEET_TEST_PASSWORD" } },
    });
    const none = await sourceForTest(server.url("fleet"));
    const unset = await sourceForTest(server.url("fleet"), {
      auth: { type: "bearer", token: { env: "KNATIVE_FLEET_TEST_UNSET" } },
    });

    for (const attempt of [
      () => wrong.source.sync(),
      () => none.source.headOf(),
      () => unset.source.sync(),
    ]) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toSatisfy(isKind("auth"));
      expect(
        JSON.stringify({ message: (error as Error).message, stack: (error as Error).stack }),
      ).not.toMatch(/wrong-password|hunter2/);
    }
  });
});

describe("a custom CA bundle", () => {
  it("trusts a server whose certificate only that bundle signs", async () => {
    const dir = await tempDirForTest("tls-");
    const [key, cert] = [join(dir, "key.pem"), join(dir, "cert.pem")];
    await execFileAsync("openssl", [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1"],
      ...["-addext", "subjectAltName=IP:127.0.0.1"],
    ]);
    const server = await gitServerForTest({
      tls: { key: await readFile(key, "utf8"), cert: await readFile(cert, "utf8") },
    });
    const head = await server.createRepo("fleet", fleetFiles);
    expect(server.url("fleet")).toMatch(/^https:/);

    const { source: untrusting } = await sourceForTest(server.url("fleet"));
    await expect(untrusting.headOf()).rejects.toSatisfy(isKind("tls"));

    const { source } = await sourceForTest(server.url("fleet"), { caFile: cert });
    expect(await source.headOf()).toBe(head);
    expect((await source.sync()).commit).toBe(head);
  });
});
