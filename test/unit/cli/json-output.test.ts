import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { parse } from "yaml";
import { commands } from "../../../src/commands/main.ts";
import { BRIEF_NO_RELEASES } from "../../../src/commands/version.ts";
import { SCHEMA_VERSION } from "../../../src/text/schema-version.ts";
import { runCli } from "../../support/cli.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { repoRoot } from "../../support/shared.ts";

// Every `-o json` a command prints starts with `schemaVersion` (plan's is its own, tested with plan), and a
// listing (status, clusters) is an object with its rows under `items`, never a bare array: a tool can check
// the version before it reads the rest. Run through the CLI against a hub that answers every list empty.

let api: Server;
let hub = "";
let work = "";

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "knative-fleet-json-"));
  // No release manifests anywhere: not the machine's $KO_DATA_PATH, not a fetched cache.
  vi.stubEnv("KO_DATA_PATH", "");
  vi.stubEnv("XDG_CACHE_HOME", work);
  api = createServer((request, response) => {
    response.setHeader("content-type", "application/json");
    if (request.url?.includes("/configmaps/")) {
      response.statusCode = 404;
      return response.end(
        '{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}',
      );
    }
    // Discovery: the kinds the commands read, all namespaced.
    if (/^\/(api\/v1|apis\/[^/]+\/[^/]+)$/.test(request.url ?? "")) {
      const resources = ["KnativeServing", "KnativeEventing", "ClusterProfile", "ConfigMap"].map((kind) => ({
        name: `${kind.toLowerCase()}s`,
        kind,
        namespaced: true,
        verbs: ["get", "list", "watch"],
      }));
      return response.end(JSON.stringify({ kind: "APIResourceList", resources }));
    }
    response.end('{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}');
  });
  await new Promise<void>((listening) => api.listen(0, "127.0.0.1", listening));
  hub = writeTokenKubeconfig({ server: `http://127.0.0.1:${(api.address() as AddressInfo).port}` }, "t");
});

afterAll(async () => {
  api?.close();
  vi.unstubAllEnvs();
  await rm(work, { recursive: true, force: true });
});

/** Each command with a json format but plan, and how to run it here. */
const runs = (): Record<string, string[]> => ({
  status: ["status", "--kubeconfig", hub],
  clusters: ["clusters", "--kubeconfig", hub],
  validate: ["validate", join(repoRoot, "fleet-example")],
  version: ["version"],
});

describe("-o json", () => {
  it("is covered here for every command that has it, plan aside", () => {
    const withJson = commands.filter((c) => c.outputFormats?.includes("json")).map((c) => c.name);
    expect(new Set(withJson)).toEqual(new Set([...Object.keys(runs()), "plan"]));
  });

  it("starts with schemaVersion in every command; status and clusters list their rows under items", async () => {
    for (const [name, argv] of Object.entries(runs())) {
      const run = await runCli(...argv, "-o", "json");
      expect(run.code, `${name}: ${run.stderr}`).toBeLessThan(2);
      const printed = JSON.parse(run.stdout) as Record<string, unknown>;
      expect(Array.isArray(printed), name).toBe(false);
      expect(Object.keys(printed)[0], name).toBe("schemaVersion");
      expect(printed.schemaVersion, name).toBe(SCHEMA_VERSION);
      if (name === "status" || name === "clusters")
        expect(printed, name).toEqual({ schemaVersion: 1, items: [] });
    }
  });

  it("-o yaml of a listing is the same object", async () => {
    for (const name of ["status", "clusters"]) {
      const run = await runCli(...runs()[name]!, "-o", "yaml");
      expect(parse(run.stdout), name).toEqual({ schemaVersion: SCHEMA_VERSION, items: [] });
    }
  });
});

describe("-v on a fresh install", () => {
  it("prints the version and one short line, nothing that reads like an error", async () => {
    const run = await runCli("-v");
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    const lines = run.stdout.trimEnd().split("\n");
    expect(lines).toEqual([
      expect.stringMatching(/^knative-fleet \d+\.\d+\.\d+\S* \(Node\.js v\d+/),
      BRIEF_NO_RELEASES,
    ]);
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(100);
    expect((await runCli("--version")).stdout).toBe(run.stdout);
  });

  it("leaves `version` its whole message of how to fetch the releases", async () => {
    const run = await runCli("version");
    expect(run.stdout).toContain("fetch-kodata.sh");
  });
});
