import { createHash } from "node:crypto";
import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  isNonPublicAddress,
  type LocationPolicy,
  LocationPolicySchema,
} from "../../../src/admission/locations.ts";
import { readManifestFiles } from "../../../src/render/files.ts";
import { LOCATIONS_AT_ONCE, LocationLoader } from "../../../src/render/location-loader.ts";

const CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-location\n";
const LOCAL_REFUSAL = "a local path must name a regular file or folder inside the kodata directory";
const refusedLocally = (location: string) => `manifest location ${location} is refused: ${LOCAL_REFUSAL}`;
const SECRET_INI = "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n";

let server: Server;
let base = "";
let kodata = "";
beforeAll(async () => {
  server = createServer((req, res) => {
    switch (req.url) {
      case "/ok.yaml":
        return res.end(CONFIG_MAP);
      case "/credentials.ini":
        return res.end(SECRET_INI);
      case "/redirect-out":
        return res.writeHead(302, { location: "http://127.0.0.1:1/elsewhere.yaml" }).end();
      case "/redirect-in":
        return res.writeHead(302, { location: "/ok.yaml" }).end();
      case "/endless": {
        // Chunked, no length: only a cap while streaming can stop it.
        const chunk = Buffer.alloc(64 * 1024, "#");
        const write = () => {
          while (res.write(chunk)) {}
        };
        res.on("drain", write);
        res.on("close", () => res.off("drain", write));
        return write();
      }
      case "/half-meg.yaml":
        return res.end(`${CONFIG_MAP}# ${"x".repeat(600 * 1024)}\n`);
      default:
        return res.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  kodata = await mkdtemp(join(tmpdir(), "knative-fleet-kodata-"));
  await mkdir(join(kodata, "extra"));
  await writeFile(join(kodata, "extra/ok.yaml"), CONFIG_MAP);
  await symlink("/dev/zero", join(kodata, "extra/zero.yaml"));
  await symlink("/etc/hostname", join(kodata, "extra/host.yaml"));
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(kodata, { recursive: true, force: true });
});

const loopbackPolicy = (overrides: Partial<LocationPolicy> = {}) =>
  LocationPolicySchema.parse({
    allowedPrefixes: [`${base}/`],
    allowHttp: true,
    allowPrivateNetworks: true,
    ...overrides,
  });
const loader = (policy: LocationPolicy = LocationPolicySchema.parse({})) =>
  new LocationLoader({ policy, kodataDir: kodata, fetchTimeoutMs: 10_000 });
const names = async (promise: Promise<readonly { metadata: { name?: string } }[]>) =>
  (await promise).map((manifest) => manifest.metadata.name);

describe("manifest location policy", () => {
  it("refuses every URL by default, naming the setting that would allow it", async () => {
    await expect(
      loader().load("https://github.com/knative/serving/releases/download/v1.22.0/serving-core.yaml"),
    ).rejects.toThrow(
      "manifest location https://github.com/knative/serving/releases/download/v1.22.0/serving-core.yaml is refused: it matches no prefix in manifestLocations.allowedPrefixes (none is set)",
    );
  });

  it("matches prefixes at a boundary only", async () => {
    const policy = LocationPolicySchema.parse({ allowedPrefixes: ["https://github.com"] });
    await expect(loader(policy).load("https://github.com.evil.example/serving.yaml")).rejects.toThrow(
      /matches no prefix/,
    );
  });

  it("refuses http unless allowed, and a host that resolves to a loopback or private address", async () => {
    await expect(loader(loopbackPolicy({ allowHttp: false })).load(`${base}/ok.yaml`)).rejects.toThrow(
      /only https is allowed \(manifestLocations\.allowHttp\)/,
    );
    const publicOnly = loopbackPolicy({ allowPrivateNetworks: false });
    await expect(loader(publicOnly).load(`${base}/ok.yaml`)).rejects.toThrow(
      /resolves to 127\.0\.0\.1, a loopback/,
    );
    // A name, not an address: the resolved address is what is checked.
    const port = new URL(base).port;
    const byName = LocationPolicySchema.parse({ allowedPrefixes: ["http://localhost"], allowHttp: true });
    await expect(loader(byName).load(`http://localhost:${port}/ok.yaml`)).rejects.toThrow(
      /localhost resolves to (127\.0\.0\.1|::1), a loopback/,
    );
    for (const address of [
      "169.254.169.254",
      "10.1.2.3",
      "192.168.0.1",
      "::1",
      "fe80::1",
      "::ffff:127.0.0.1",
      "fd00::1",
    ]) {
      expect(isNonPublicAddress(address)).toBe(true);
    }
    expect(isNonPublicAddress("140.82.112.3")).toBe(false);
  });

  it("checks every redirect against the policy", async () => {
    expect(await names(loader(loopbackPolicy()).load(`${base}/redirect-in`))).toEqual(["from-location"]);
    await expect(loader(loopbackPolicy()).load(`${base}/redirect-out`)).rejects.toThrow(
      /http:\/\/127\.0\.0\.1:1\/elsewhere\.yaml is refused: it matches no prefix/,
    );
  });

  it("stops reading at the size cap, declared or streamed", async () => {
    const capped = loopbackPolicy({ maxBytesPerLocation: 1024 * 1024 });
    const before = process.memoryUsage().rss;
    await expect(loader(capped).load(`${base}/endless`)).rejects.toThrow(/over 1048576 bytes/);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
    await expect(
      loader(loopbackPolicy({ maxBytesPerLocation: 1000 })).load(`${base}/ok.yaml#x`),
    ).resolves.toHaveLength(1);
  });

  it("bounds all the locations of one CR together", async () => {
    const locations = loader(loopbackPolicy({ maxBytesPerResource: 1024 * 1024 }));
    const budget = locations.budget();
    await locations.load(`${base}/half-meg.yaml`, budget);
    await expect(locations.load(`${base}/half-meg.yaml`, budget)).rejects.toThrow(
      /more than 1048576 bytes \(manifestLocations\.maxBytesPerResource\)/,
    );
  });

  it("verifies a sha256 pin carried in the URL's fragment", async () => {
    const digest = createHash("sha256").update(CONFIG_MAP).digest("hex");
    expect(await names(loader(loopbackPolicy()).load(`${base}/ok.yaml#sha256=${digest}`))).toEqual([
      "from-location",
    ]);
    await expect(loader(loopbackPolicy()).load(`${base}/ok.yaml#sha256=${"0".repeat(64)}`)).rejects.toThrow(
      `manifests at ${base}/ok.yaml do not match their sha256 pin (got ${digest})`,
    );
  });

  it("never quotes what it read", async () => {
    const error = await loader(loopbackPolicy())
      .load(`${base}/credentials.ini`)
      .then(
        () => undefined,
        (err: Error) => err.message,
      );
    expect(error).toBe(
      `the content at ${base}/credentials.ini is not Kubernetes manifests (multi-document YAML of objects)`,
    );
  });

  it("reads local paths only inside kodata, regular files only: /dev/zero costs nothing", async () => {
    expect(await names(loader().load("extra/ok.yaml"))).toEqual(["from-location"]);
    expect(await names(loader().load(join(kodata, "extra")))).toEqual(["from-location"]);
    const before = process.memoryUsage().rss;
    for (const location of [
      "/dev/zero",
      "file:///dev/zero",
      "extra/zero.yaml",
      "extra/host.yaml",
      "/var/run/secrets/kubernetes.io/serviceaccount/token",
    ]) {
      await expect(loader().load(location)).rejects.toThrow(refusedLocally(location));
    }
    // Even inside kodata (here: kodata is /dev), a device is no file.
    const devAsKodata = new LocationLoader({ kodataDir: "/dev" });
    await expect(devAsKodata.load("/dev/zero")).rejects.toThrow(refusedLocally("/dev/zero"));
    await expect(readManifestFiles("/dev/zero", 1024)).rejects.toThrow(/not a regular file/);
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });

  it("refuses a local path with one message whether it exists or not: no file-existence oracle", async () => {
    const messages = new Set<string>();
    for (const [location, exists] of [
      ["/etc/hostname", true],
      ["/etc/no-such-file-here", false],
      ["../../../../etc/passwd", true],
      ["../../../../etc/no-such-file-here", false],
      ["extra/missing.yaml", false],
      ["extra/host.yaml", true], // a link out of kodata
    ] as const) {
      const message = await loader()
        .load(location)
        .then(
          () => "loaded",
          (err: Error) => err.message,
        );
      expect(message, `${location} (exists: ${exists})`).toBe(
        `manifest location ${location} is refused: ${LOCAL_REFUSAL}`,
      );
      messages.add(message.replace(location, "<location>"));
    }
    expect(messages.size).toBe(1);
  });
});

describe("one CR's manifest budget", () => {
  let large: Server;
  let largeBase = "";
  let started = 0;
  let inFlight = 0;
  let mostInFlight = 0;
  beforeAll(async () => {
    // Each location: 1 MiB of manifests, sent slowly enough that loads overlap.
    large = createServer((_req, res) => {
      started++;
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      res.on("close", () => inFlight--);
      const chunk = Buffer.from(`${CONFIG_MAP}# ${"x".repeat(64 * 1024)}\n`);
      let sent = 0;
      const send = () => {
        if (sent >= 16) return res.end();
        sent++;
        res.write(chunk);
        setTimeout(send, 5);
      };
      send();
    });
    await new Promise<void>((resolve) => large.listen(0, "127.0.0.1", resolve));
    largeBase = `http://127.0.0.1:${(large.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    large.closeAllConnections();
    await new Promise((resolve) => large.close(resolve));
  });

  it("charges bytes as they arrive across all of a CR's locations, with at most a few loading at once", async () => {
    const locations = new LocationLoader({
      policy: LocationPolicySchema.parse({
        allowedPrefixes: [`${largeBase}/`],
        allowHttp: true,
        allowPrivateNetworks: true,
        maxBytesPerResource: 2 * 1024 * 1024,
      }),
    });
    const budget = locations.budget();
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) => locations.load(`${largeBase}/l${i}.yaml`, budget)),
    );
    const refused = results.filter((r) => r.status === "rejected");
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused)
      expect((r as PromiseRejectedResult).reason.message).toBe(
        "the manifest locations of this CR hold more than 2097152 bytes (manifestLocations.maxBytesPerResource)",
      );
    // 16 locations of 1 MiB against 2 MiB: the loads that waited for a slot never started a request.
    expect(mostInFlight).toBeLessThanOrEqual(LOCATIONS_AT_ONCE);
    expect(started).toBeLessThanOrEqual(LOCATIONS_AT_ONCE);
  });
});
