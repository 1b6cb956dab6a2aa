import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import {
  ADOPT_ANNOTATION,
  CONFIRM_PRUNE_ANNOTATION,
  PRUNE_ANNOTATION,
  PRUNE_CONFIRMATION_CONFIGMAP,
  PRUNE_DISABLED,
  SOURCE_COMMIT_ANNOTATION,
  SOURCE_PATH_ANNOTATION,
  SOURCE_REPOSITORY_ANNOTATION,
} from "../../../src/api/labels.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { clientFromKubeConfig, loadKubeConfig } from "../../../src/kube/kubeconfig.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import type { MirrorOptions } from "../../../src/mirror/decide.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { type InertCrOptions, inertCrFile } from "../../support/fleet-files.ts";
import { repoRoot } from "../../support/shared.ts";
import { syncInto } from "../../support/sync.ts";
import { waitUntil } from "../../support/wait.ts";

// The mirror against the sandbox's real hub. No controller runs here, so the CRs get no finalizer and a
// delete is immediate; each CR targets a ClusterProfile that does not exist, so nothing could install anyway.
// Each test has its own namespace and repository URL: a prune only ever sees that repository's CRs.

const sandbox = loadSandbox();
const hub = clientFromKubeConfig(loadKubeConfig(sandbox.hub.adminKubeconfig));
const namespaces: string[] = [];
const WRITE_METHODS = ["POST", "PUT", "PATCH", "DELETE"];

beforeAll(async () => {
  await installCrds(hub);
});

afterAll(async () => {
  await Promise.all(namespaces.map((ns) => hub.delete("v1", "Namespace", undefined, ns)));
});

/** Installs the chart's CRDs and waits until the hub serves lists of them (429 while its cache fills). */
async function installCrds(client: KubeClient): Promise<void> {
  const dir = join(repoRoot, "charts", "knative-fleet", "crds");
  for (const file of readdirSync(dir).filter((name) => name.endsWith(".yaml"))) {
    await client.apply(parse(readFileSync(join(dir, file), "utf8")) as KubeObject);
  }
  for (const kind of KNATIVE_KINDS) {
    await waitUntil(`${kind} served`, () =>
      client.list(OPERATOR_API_VERSION, kind).then(
        () => true,
        () => undefined,
      ),
    );
  }
}

/** A fresh namespace for one test, and the fleet of that test: its files sync into the namespace. */
async function testFleet(label: string) {
  const ns = `mirror-test-${label}-${randomBytes(3).toString("hex")}`;
  namespaces.push(ns);
  await hub.apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  const repository = `https://git.example/mirror-test/${ns}.git`;
  /** One sync of `files` through `client` (the hub unless told), as the service runs it. */
  const syncThrough = (
    client: KubeClient,
    files: readonly FleetFile[],
    commit: string,
    options: { prune?: Partial<MirrorOptions>; repository?: string } = {},
  ) => syncInto(client, { files, namespace: ns, commit, repository, ...options });
  return {
    ns,
    repository,
    file: (name: string, options: Omit<InertCrOptions, "namespace"> = {}) =>
      inertCrFile(name, { ...options, namespace: ns }),
    sync: (files: readonly FleetFile[], commit: string, prune: Partial<MirrorOptions> = {}) =>
      syncThrough(hub, files, commit, { prune }),
    syncThrough,
    get: (name: string, kind = "KnativeServing") => hub.get(OPERATOR_API_VERSION, kind, ns, name),
    names: async () =>
      (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace: ns })).items
        .map((o) => o.metadata.name)
        .sort(),
  };
}

const commit = (n: number): string => n.toString(16).padStart(40, "0");

function writes(client: KubeClient): number {
  return WRITE_METHODS.reduce((sum, method) => sum + (client.rest.requestCounts.get(method) ?? 0), 0);
}

const specOf = (object: KubeObject | undefined) => object?.spec as { version?: string } | undefined;

describe("mirror onto the hub", () => {
  it("creates an added CR with its source, updates an edited one, deletes a removed one", async () => {
    const fleet = await testFleet("lifecycle");
    const added = await fleet.sync([fleet.file("alpha"), fleet.file("beta")], commit(1));
    expect(added.resources.map((r) => [r.name, r.action, r.error])).toEqual([
      ["alpha", "create", undefined],
      ["beta", "create", undefined],
    ]);
    const alpha = await fleet.get("alpha");
    expect(alpha?.metadata.labels).toMatchObject({ "app.kubernetes.io/managed-by": "knative-fleet" });
    expect(alpha?.metadata.annotations).toMatchObject({
      [SOURCE_REPOSITORY_ANNOTATION]: fleet.repository,
      [SOURCE_PATH_ANNOTATION]: "clusters/alpha.yaml",
      [SOURCE_COMMIT_ANNOTATION]: commit(1),
    });

    const edited = await fleet.sync(
      [fleet.file("alpha", { version: "1.23" }), fleet.file("beta")],
      commit(2),
    );
    expect(edited.resources.map((r) => [r.name, r.action])).toEqual([
      ["alpha", "update"],
      ["beta", "unchanged"],
    ]);
    expect(specOf(await fleet.get("alpha"))?.version).toBe("1.23");
    expect((await fleet.get("alpha"))?.metadata.annotations?.[SOURCE_COMMIT_ANNOTATION]).toBe(commit(2));
    expect((await fleet.get("beta"))?.metadata.annotations?.[SOURCE_COMMIT_ANNOTATION]).toBe(commit(1));

    const removed = await fleet.sync([fleet.file("alpha", { version: "1.23" })], commit(3));
    expect(removed.prune).toMatchObject({ state: "pruned", candidates: [{ name: "beta" }] });
    expect(await fleet.names()).toEqual(["alpha"]);
  });

  it("sends no write when the content is unchanged, even at a new commit", async () => {
    const fleet = await testFleet("noop");
    const files = [fleet.file("alpha"), fleet.file("beta", { version: "1.21" })];
    await fleet.sync(files, commit(1));
    const before = writes(hub);
    const again = await fleet.sync(files, commit(2));
    expect(writes(hub) - before).toBe(0);
    expect(again.resources.map((r) => r.action)).toEqual(["unchanged", "unchanged"]);
    expect(again.prune.state).toBe("none");
  });

  it("keeps an invalid file's CR at its last good state, prunes nothing, and still applies the rest", async () => {
    const fleet = await testFleet("invalid");
    await fleet.sync([fleet.file("alpha"), fleet.file("beta"), fleet.file("gamma")], commit(1));
    const broken = {
      ...fleet.file("beta", { version: "1.23" }),
      text: `${fleet.file("beta").text}  typo: 1\n`,
    };
    const result = await fleet.sync([fleet.file("alpha", { version: "1.23" }), broken], commit(2));
    expect(result.diagnostics.map((d) => `${d.path}:${d.line}:${d.column} ${d.field}`)).toEqual([
      "clusters/beta.yaml:11:3 spec.typo",
    ]);
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([["alpha", "update"]]);
    expect(result.prune).toMatchObject({
      state: "skipped",
      reason: "invalid-files",
      candidates: [{ name: "gamma" }],
    });
    expect(await fleet.names()).toEqual(["alpha", "beta", "gamma"]);
    expect(specOf(await fleet.get("alpha"))?.version).toBe("1.23");
    expect(specOf(await fleet.get("beta"))?.version).toBe("1.22");
  });

  it("leaves a hand-made CR of the same kind and name alone and reports the conflict", async () => {
    const fleet = await testFleet("handmade");
    const handMade = {
      apiVersion: OPERATOR_API_VERSION,
      kind: "KnativeServing",
      metadata: { name: "alpha", namespace: fleet.ns, labels: { team: "platform" } },
      spec: { version: "1.20" },
    };
    await hub.rest.request({
      method: "POST",
      path: await hub.path(OPERATOR_API_VERSION, "KnativeServing", fleet.ns),
      body: handMade,
    });
    const result = await fleet.sync([fleet.file("alpha"), fleet.file("beta")], commit(1));
    expect(result.resources.map((r) => [r.name, r.action])).toEqual([
      ["alpha", "conflict"],
      ["beta", "create"],
    ]);
    const live = await fleet.get("alpha");
    expect(live?.metadata.labels).toEqual({ team: "platform" });
    expect(specOf(live)?.version).toBe("1.20");

    const withoutIt = await fleet.sync([fleet.file("beta")], commit(2));
    expect(withoutIt.prune.state).toBe("none");
    expect(await fleet.names()).toEqual(["alpha", "beta"]);
  });

  it("a second repository declaring the same CR: a conflict, not updated, not pruned, until adopted", async () => {
    const fleet = await testFleet("owner");
    await fleet.sync([fleet.file("alpha"), fleet.file("beta")], commit(1));
    const other = "https://git.example/mirror-test/another-team.git";
    const second = (files: FleetFile[], at: string) =>
      fleet.syncThrough(hub, files, at, { repository: other });
    const taken = await second([fleet.file("alpha", { version: "1.23" })], commit(2));
    expect(taken.resources).toEqual([
      expect.objectContaining({
        name: "alpha",
        action: "conflict",
        reason: expect.stringContaining(`mirrored from repository ${fleet.repository}`),
      }),
    ]);
    expect(taken.prune.state).toBe("none");
    const alpha = await fleet.get("alpha");
    expect(specOf(alpha)?.version).toBe("1.22");
    expect(alpha?.metadata.annotations?.[SOURCE_REPOSITORY_ANNOTATION]).toBe(fleet.repository);

    // A person hands alpha over; the next sync of the second repository takes it.
    await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", fleet.ns, "alpha", {
      metadata: { annotations: { [ADOPT_ANNOTATION]: other } },
    });
    const adopted = await second([fleet.file("alpha", { version: "1.23" })], commit(3));
    expect(adopted.resources.map((r) => [r.name, r.action])).toEqual([["alpha", "update"]]);
    const after = await fleet.get("alpha");
    expect(specOf(after)?.version).toBe("1.23");
    expect(after?.metadata.annotations?.[SOURCE_REPOSITORY_ANNOTATION]).toBe(other);
    // From then on the first repository no longer prunes it, and cannot take it back without a marker.
    const first = await fleet.sync([fleet.file("beta")], commit(4));
    expect(first.prune.state).toBe("none");
    expect(await fleet.names()).toEqual(["alpha", "beta"]);
  });

  it("prunes nothing when Git declares no CR, unless allowed", async () => {
    const fleet = await testFleet("empty");
    await fleet.sync([fleet.file("alpha")], commit(1));
    const empty = await fleet.sync([], commit(2));
    expect(empty.prune).toMatchObject({ state: "skipped", reason: "empty-desired-set" });
    expect(await fleet.names()).toEqual(["alpha"]);
  });

  it("holds a prune of 90% of the CRs until a person confirms exactly that prune on the hub", async () => {
    const fleet = await testFleet("held");
    const names = Array.from({ length: 10 }, (_, i) => `cr-${i}`);
    await fleet.sync(
      names.map((name) => fleet.file(name)),
      commit(1),
    );
    const held = await fleet.sync([fleet.file("cr-0")], commit(2));
    expect(held.prune).toMatchObject({ state: "held", reason: "over-max-fraction" });
    expect(held.prune.candidates).toHaveLength(9);
    expect(await fleet.names()).toEqual(names);

    // A later commit that leaves the same CRs out is the same prune: same token, still held.
    const configMap = (token: string): KubeObject => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: PRUNE_CONFIRMATION_CONFIGMAP,
        namespace: fleet.ns,
        annotations: { [CONFIRM_PRUNE_ANNOTATION]: token },
      },
    });
    await hub.apply(configMap("0000000000000000"));
    const stillHeld = await fleet.sync([fleet.file("cr-0")], commit(3));
    expect(stillHeld.prune).toMatchObject({ state: "held", confirmation: held.prune.confirmation });
    expect(await fleet.names()).toEqual(names);

    await hub.apply(configMap(held.prune.confirmation!.token));
    const confirmed = await fleet.sync([fleet.file("cr-0")], commit(3));
    expect(confirmed.prune.state).toBe("pruned");
    expect(await fleet.names()).toEqual(["cr-0"]);
  });

  it("never prunes a CR whose last applied state says prune: disabled", async () => {
    const fleet = await testFleet("keep");
    const kept = fleet.file("alpha", { annotations: { [PRUNE_ANNOTATION]: PRUNE_DISABLED } });
    await fleet.sync([kept, fleet.file("beta"), fleet.file("gamma")], commit(1));
    const result = await fleet.sync([fleet.file("gamma")], commit(2));
    expect(result.prune).toMatchObject({
      state: "pruned",
      candidates: [{ name: "beta" }],
      retained: [{ name: "alpha", path: "clusters/alpha.yaml" }],
    });
    expect(await fleet.names()).toEqual(["alpha", "gamma"]);
  });

  it("converges after a sync cut short, creating nothing twice and pruning nothing meanwhile", async () => {
    const fleet = await testFleet("restart");
    await fleet.sync([fleet.file("old")], commit(1));
    const files = ["alpha", "beta", "gamma"].map((name) => fleet.file(name));
    // The hub dies after two applies: the rest are refused, so the prune of `old` waits.
    let applies = 0;
    const dying = Object.assign(Object.create(hub) as KubeClient, {
      apply: (object: KubeObject) =>
        ++applies <= 2 ? hub.apply(object) : Promise.reject(new Error("connection reset")),
    });
    const cut = await fleet.syncThrough(dying, files, commit(2));
    expect(cut.resources.map((r) => [r.name, r.action, r.error])).toEqual([
      ["alpha", "create", undefined],
      ["beta", "create", undefined],
      ["gamma", "create", "connection reset"],
    ]);
    expect(cut.prune).toMatchObject({ state: "skipped", reason: "apply-failed" });
    expect(await fleet.names()).toEqual(["alpha", "beta", "old"]);

    const rerun = await fleet.sync(files, commit(2));
    expect(rerun.resources.map((r) => [r.name, r.action])).toEqual([
      ["alpha", "unchanged"],
      ["beta", "unchanged"],
      ["gamma", "create"],
    ]);
    expect(rerun.prune.state).toBe("pruned");
    expect(await fleet.names()).toEqual(["alpha", "beta", "gamma"]);
  });
});
