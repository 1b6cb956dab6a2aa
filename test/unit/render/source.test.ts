import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { LocationPolicySchema } from "../../../src/admission/locations.ts";
import { createKodataSource } from "../../../src/render/index.ts";
import { LocationLoader } from "../../../src/render/location-loader.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

const configMap = (name: string) => `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n`;

describe("the kodata directory source", () => {
  const source = createKodataSource({ dir: knativeReleasesDir() });

  it("lists the shipped versions newest first", async () => {
    // The upstream operator's window, 1.20 to 1.23.
    expect(await source.componentVersions("knative-serving")).toEqual([
      "1.23.0",
      "1.22.1",
      "1.21.3",
      "1.20.3",
    ]);
    expect(await source.componentVersions("knative-eventing")).toEqual([
      "1.23.0",
      "1.22.2",
      "1.21.4",
      "1.20.3",
    ]);
  });

  it("reads a release's files in file-name order", async () => {
    const manifests = await source.componentManifests("knative-serving", "1.22.1");
    // 1-serving-crds.yaml first, 4-serving-post-install-jobs.yaml last.
    expect(manifests[0]!.kind).toBe("CustomResourceDefinition");
    expect(manifests.at(-1)).toMatchObject({ kind: "Job", metadata: { generateName: "cleanup-serving-" } });
    expect(manifests).toHaveLength(12 + 59 + 2 + 2);
  });

  it("reads an ingress by name and Serving minor, and has none for a minor it does not ship", async () => {
    const kourier = await source.ingressManifests("kourier", "1.21");
    expect(kourier?.find((manifest) => manifest.kind === "Deployment")?.metadata.labels).toMatchObject({
      "app.kubernetes.io/version": expect.stringMatching(/^1\.21\./),
    });
    expect(await source.ingressManifests("kourier", "1.24")).toBeUndefined();
  });
});

describe("LocationLoader", () => {
  let server: Server;
  let baseUrl: string;
  let releaseText: string;
  let failuresLeft: number;
  const requests = new Map<string, number>();
  let clock: number;
  // A generous timeout for the ordinary cases (a loaded CI machine is slow); the timeout case sets its own.
  // The test server is on loopback over http: the policy must allow both, and its prefix.
  const loader = (fetchTimeoutMs = 10_000, kodataDir?: string) =>
    new LocationLoader({
      fetchTimeoutMs,
      maxAgeMs: 60_000,
      now: () => clock,
      kodataDir,
      policy: LocationPolicySchema.parse({
        allowedPrefixes: [`${baseUrl}/`],
        allowHttp: true,
        allowPrivateNetworks: true,
      }),
    });

  beforeAll(async () => {
    server = createServer((request, response) => {
      const path = request.url ?? "";
      requests.set(path, (requests.get(path) ?? 0) + 1);
      if (path === "/slow.yaml") return; // never answers
      if (path === "/flaky.yaml" && failuresLeft-- > 0) return response.writeHead(503).end();
      if (path === "/release.yaml" || path === "/flaky.yaml") return response.end(releaseText);
      response.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    requests.clear();
    releaseText = configMap("config-network");
    failuresLeft = 0;
    clock = 0;
  });

  it("fetches a URL once and serves the same objects from memory", async () => {
    const locations = loader();
    const first = await locations.load(`${baseUrl}/release.yaml`);
    const second = await locations.load(`${baseUrl}/release.yaml`);
    expect(first.map((manifest) => manifest.metadata.name)).toEqual(["config-network"]);
    expect(second).toBe(first);
    expect(requests.get("/release.yaml")).toBe(1);
  });

  it("shares one fetch between concurrent loads", async () => {
    const locations = loader();
    const [a, b] = await Promise.all([
      locations.load(`${baseUrl}/release.yaml`),
      locations.load(`${baseUrl}/release.yaml`),
    ]);
    expect(a).toBe(b);
    expect(requests.get("/release.yaml")).toBe(1);
  });

  it("re-fetches after maxAge and returns the identical objects when the content did not change", async () => {
    const locations = loader();
    const first = await locations.load(`${baseUrl}/release.yaml`);
    clock = 60_000;
    const refetched = await locations.load(`${baseUrl}/release.yaml`);
    expect(requests.get("/release.yaml")).toBe(2);
    expect(refetched).toBe(first);

    releaseText = configMap("config-domain");
    clock = 120_000;
    const changed = await locations.load(`${baseUrl}/release.yaml`);
    expect(changed.map((manifest) => manifest.metadata.name)).toEqual(["config-domain"]);
  });

  it("gives up on a server that does not answer in time", async () => {
    const started = performance.now();
    await expect(loader(200).load(`${baseUrl}/slow.yaml`)).rejects.toThrow(
      `cannot fetch manifests from ${baseUrl}/slow.yaml: timed out after 200 ms`,
    );
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it("reports an HTTP error status", async () => {
    await expect(loader().load(`${baseUrl}/missing.yaml`)).rejects.toThrow(
      `cannot fetch manifests from ${baseUrl}/missing.yaml: HTTP 404`,
    );
  });

  it("does not cache a failure: the next load fetches again", async () => {
    const locations = loader();
    failuresLeft = 1;
    await expect(locations.load(`${baseUrl}/flaky.yaml`)).rejects.toThrow("HTTP 503");
    expect((await locations.load(`${baseUrl}/flaky.yaml`)).length).toBe(1);
    expect(requests.get("/flaky.yaml")).toBe(2);
  });

  it("reads file:// URLs, plain paths and directories (files in name order)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "render-location-"));
    try {
      await writeFile(join(dir, "2-second.yaml"), configMap("second"));
      await writeFile(join(dir, "1-first.yml"), configMap("first"));
      await writeFile(join(dir, "README.md"), "not a manifest");
      const locations = loader(10_000, dir);
      const names = async (location: string) =>
        (await locations.load(location)).map((manifest) => manifest.metadata.name);
      expect(await names(pathToFileURL(join(dir, "2-second.yaml")).href)).toEqual(["second"]);
      expect(await names(join(dir, "1-first.yml"))).toEqual(["first"]);
      expect(await names(dir)).toEqual(["first", "second"]);
      await expect(locations.load(join(dir, "absent.yaml"))).rejects.toThrow(
        /absent\.yaml is refused: a local path must name a regular file or folder inside the kodata directory/,
      );
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});
