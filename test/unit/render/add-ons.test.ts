import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { EVENT_SOURCES, type KnativeEventingSpec, withEveryEventSource } from "../../../src/api/knative.ts";
import { objectKey } from "../../../src/kube/object.ts";
import {
  compileKodata,
  parseManifests,
  render,
  SECURITY_GUARD_VERSIONS,
  selectedAddOns,
} from "../../../src/render/index.ts";
import { QUEUE_PROXY_MOUNT_PODINFO } from "../../../src/render/transformers/security-guard.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import { knativeEventing, knativeServing, releases } from "./fixtures.ts";

// KnativeEventing.spec.source and KnativeServing.spec.security.securityGuard install what upstream's kodata
// holds for them (eventing-source/<minor>/<source>/, security-guard/<version>/), transformed like the release.

const MINORS = ["1.20", "1.21", "1.22", "1.23"] as const;
/** The loops below load and render every release and add-on of ../shared: slow on a loaded machine. */
const CORPUS = { timeout: 60_000 };

const eventingWith = (version: string, ...sources: string[]) =>
  knativeEventing(
    withEveryEventSource({
      version,
      source: Object.fromEntries(sources.map((name) => [name, { enabled: true }])),
    }) as KnativeEventingSpec,
  );

/** Every object of a kodata folder, as its files hold them (before any transform). */
function folderObjects(folder: string) {
  const dir = join(knativeReleasesDir(), folder);
  return readdirSync(dir)
    .filter((file) => file.endsWith(".yaml"))
    .flatMap((file) => parseManifests(readFileSync(join(dir, file), "utf8"), file));
}

const named = (objects: readonly { kind: string; metadata: { name?: string } }[]) =>
  new Set(objects.map((object) => `${object.kind}/${object.metadata.name}`));

describe("event sources", CORPUS, () => {
  it("installs each enabled source of the target minor, for every source and minor kodata has", async () => {
    for (const minor of MINORS) {
      const plain = await releases.load(eventingWith(minor));
      for (const source of EVENT_SOURCES) {
        const release = await releases.load(eventingWith(minor, source));
        expect(release.addOns).toEqual([{ kind: "eventing-source", source, minor }]);
        const own = named(folderObjects(join("eventing-source", minor, source)));
        const added = named(release.manifests);
        for (const object of own) expect(added.has(object), `${minor} ${source}: ${object}`).toBe(true);
        expect(release.manifests.length).toBeGreaterThan(plain.manifests.length);
        expect(release.locations).toContain(join(knativeReleasesDir(), "eventing-source", minor, source));
      }
    }
  });

  it("adds nothing when no source is enabled, or when spec.source lists them all disabled", async () => {
    const without = await releases.load(knativeEventing({ version: "1.22" }));
    const disabled = await releases.load(eventingWith("1.22"));
    expect(without.addOns).toEqual([]);
    expect(disabled.addOns).toEqual([]);
    expect(named(disabled.manifests)).toEqual(named(without.manifests));
    expect(disabled.locations).toEqual(without.locations);
  });

  it("several sources come in upstream's order (ceph, github, gitlab, kafka, rabbitmq, redis)", async () => {
    const release = await releases.load(eventingWith("1.23", "redis", "kafka", "github"));
    expect(release.addOns.map((addOn) => (addOn.kind === "eventing-source" ? addOn.source : ""))).toEqual([
      "github",
      "kafka",
      "redis",
    ]);
  });

  it("renders a source into the install namespace, its own Namespace object folded into it", async () => {
    const resource = eventingWith("1.22", "redis");
    const objects = render(resource, await releases.load(resource), "knative-eventing");
    const sourceObjects = named(folderObjects("eventing-source/1.22/redis"));
    const rendered = objects.filter((object) => sourceObjects.has(`${object.kind}/${object.metadata.name}`));
    expect(rendered.length).toBeGreaterThan(0);
    for (const object of rendered)
      if (object.metadata.namespace !== undefined)
        expect(object.metadata.namespace, objectKey(object)).toBe("knative-eventing");
    expect(
      objects.some((object) => object.kind === "Namespace" && object.metadata.name === "knative-sources"),
    ).toBe(false);
  });

  it("disabling a source takes its objects out of the desired set (the inventory then prunes them)", async () => {
    const enabled = eventingWith("1.23", "rabbitmq");
    const disabled = eventingWith("1.23");
    const before = named(render(enabled, await releases.load(enabled), "knative-eventing"));
    const after = named(render(disabled, await releases.load(disabled), "knative-eventing"));
    const rabbitmq = [...before].filter((object) => !after.has(object));
    expect(rabbitmq).toContain("Deployment/rabbitmq-controller-manager");
    expect([...after].filter((object) => !before.has(object))).toEqual([]);
  });

  it("an upgrade takes the source to the new minor's manifests", async () => {
    const images = async (minor: string) => {
      const resource = eventingWith(minor, "redis");
      return render(resource, await releases.load(resource), "knative-eventing")
        .filter((object) => object.metadata.name === "redis-controller-manager")
        .map((object) => JSON.stringify(object.spec));
    };
    expect(await images("1.22")).not.toEqual(await images("1.23"));
  });
});

describe("Security-Guard", CORPUS, () => {
  const servingWithGuard = (version: string, enabled = true) =>
    knativeServing({ version, security: { securityGuard: { enabled } } });

  it("installs Security-Guard's release for each Serving minor, as upstream maps them", async () => {
    for (const minor of MINORS) {
      const guard = SECURITY_GUARD_VERSIONS[minor]!;
      const release = await releases.load(servingWithGuard(minor));
      expect(release.addOns).toEqual([{ kind: "security-guard", version: guard }]);
      const added = named(release.manifests);
      for (const object of named(folderObjects(join("security-guard", guard))))
        expect(added.has(object), `${minor}: ${object}`).toBe(true);
    }
  });

  it("allows the queue-proxy pod info that its gate reads, over spec.config", async () => {
    const resource = knativeServing({
      version: "1.23",
      security: { securityGuard: { enabled: true } },
      config: { features: { [QUEUE_PROXY_MOUNT_PODINFO]: "disabled" } },
    });
    const features = render(resource, await releases.load(resource), "knative-serving").find(
      (object) => object.kind === "ConfigMap" && object.metadata.name === "config-features",
    );
    expect(((features?.data ?? {}) as Record<string, string>)[QUEUE_PROXY_MOUNT_PODINFO]).toBe("allowed");
  });

  it("disabled, nothing of it is installed and config-features is the release's", async () => {
    const off = servingWithGuard("1.23", false);
    const release = await releases.load(off);
    expect(release.addOns).toEqual([]);
    expect(release.manifests.some((object) => object.metadata.name === "guard-service")).toBe(false);
    const features = render(off, release, "knative-serving").find(
      (object) => object.kind === "ConfigMap" && object.metadata.name === "config-features",
    );
    const shipped = release.manifests.find(
      (object) => object.kind === "ConfigMap" && object.metadata.name === "config-features",
    );
    expect(features?.data).toEqual(shipped?.data);
  });

  it("a Serving minor upstream has no Security-Guard for selects none, which the loader refuses", () => {
    expect(selectedAddOns(servingWithGuard("1.19.0"), "1.19.0")).toBeUndefined();
    expect(selectedAddOns(servingWithGuard("1.23.0"), "1.23.0")).toEqual([
      { kind: "security-guard", version: "0.6" },
    ]);
  });
});

describe("compile-kodata", () => {
  it("compiles the event source and Security-Guard folders too", async () => {
    const dir = mkdtempSync(join(tmpdir(), "knative-fleet-addons-"));
    try {
      for (const folder of [
        "eventing-source/1.23/redis",
        "eventing-source/1.23/not-a-source",
        "security-guard/0.6",
      ])
        cpSync(join(knativeReleasesDir(), folder.replace("not-a-source", "redis")), join(dir, folder), {
          recursive: true,
        });
      const folders: string[] = [];
      for await (const { folder, bytes } of compileKodata(dir)) {
        folders.push(relative(dir, folder));
        expect(bytes, folder).toBeGreaterThan(0);
      }
      expect(folders.sort()).toEqual(["eventing-source/1.23/redis", "security-guard/0.6"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
