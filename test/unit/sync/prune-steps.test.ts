import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { fixedPlacements } from "../../../src/sync/sync.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { syncInto } from "../../support/sync.ts";
import { crFile } from "../mirror/support.ts";
import { cluster, inventory, NS, PROFILES, placementFile } from "../placement/support.ts";

// The sync's prune and admission steps (src/sync/sync.ts, steps 3, 4 and 7), asserted on what they do to
// the hub: a departed cluster's CR is kept for its grace period, nothing is pruned while a CR was refused or
// failed to apply, and the admission judges every CR a commit declares, an unchanged one too.

const GRACE_MS = 300_000;
const commit = (n: number) => String(n).repeat(40);

function hub(kinds: readonly string[] = KNATIVE_KINDS) {
  return new FakeKube().serveKindsOf(
    kinds.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
  );
}

describe("sync: the prune step", () => {
  it("keeps a departed placement cluster's CR for its grace period, then prunes it", async () => {
    const kube = hub();
    let now = Date.parse("2026-03-02T15:00:00Z");
    const placements = fixedPlacements(
      inventory([cluster("spoke-1"), cluster("spoke-2")]),
      GRACE_MS,
      () => now,
    );
    const placement = (clusters: string[]): FleetFile => ({
      path: "clusters/placements/serving.yaml",
      text: placementFile(
        "serving",
        `  clusterProfiles: [${clusters.map((c) => `{ namespace: ${PROFILES}, name: ${c} }`).join(", ")}]`,
      ),
    });
    const syncAt = (files: FleetFile[], n: number) =>
      syncInto(kube.client, { files, namespace: NS, commit: commit(n), placements });

    await syncAt([placement(["spoke-1", "spoke-2"])], 1);
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeDefined();

    // spoke-1 leaves the placement: its CR is held, not a prune candidate, still on the hub.
    const left = await syncAt([placement(["spoke-2"])], 2);
    expect(left.placements.departures).toEqual([expect.objectContaining({ cluster: `${PROFILES}/spoke-1` })]);
    expect(left.prune.candidates).toEqual([]);
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeDefined();
    now += GRACE_MS - 1_000;
    expect((await syncAt([placement(["spoke-2"])], 2)).prune.candidates).toEqual([]);
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeDefined();

    // Its grace period over: pruned.
    now += 2_000;
    const pruned = await syncAt([placement(["spoke-2"])], 2);
    expect(pruned.prune).toMatchObject({
      state: "pruned",
      candidates: [expect.objectContaining({ name: "serving-spoke-1" })],
    });
    expect(kube.find("KnativeServing", "serving-spoke-1")).toBeUndefined();
    expect(kube.find("KnativeServing", "serving-spoke-2")).toBeDefined();
  });

  it("prunes nothing while a CR was refused by the admission", async () => {
    const kube = hub();
    const files = [crFile("alpha", { namespace: "fleet" }), crFile("beta", { namespace: "fleet" })];
    await syncInto(kube.client, { files, namespace: "fleet", commit: commit(1) });
    expect(kube.find("KnativeServing", "beta")).toBeDefined();
    // beta leaves Git while alpha's namespace is no longer one whose CRs are reconciled.
    const result = await syncInto(kube.client, {
      files: [files[0]!],
      namespace: "fleet",
      commit: commit(2),
      settings: { crNamespaces: ["elsewhere"] },
    });
    expect(result.resources).toEqual([expect.objectContaining({ name: "alpha", action: "refused" })]);
    expect(result.prune).toMatchObject({ state: "skipped", reason: "apply-failed" });
    expect(kube.find("KnativeServing", "beta")).toBeDefined();
  });

  it("prunes nothing while a CR failed to apply on the hub", async () => {
    const kube = hub();
    // A hub that refuses every write of gamma, as a webhook or a quota would.
    const client = Object.create(kube.client) as typeof kube.client;
    client.apply = async (object, ...rest) => {
      if (object.metadata.name === "gamma") throw new Error("admission webhook denied the request");
      return kube.client.apply(object, ...rest);
    };
    const files = [crFile("alpha", { namespace: "fleet" }), crFile("beta", { namespace: "fleet" })];
    await syncInto(client, { files, namespace: "fleet", commit: commit(1) });
    const result = await syncInto(client, {
      files: [files[0]!, crFile("gamma", { namespace: "fleet" })],
      namespace: "fleet",
      commit: commit(2),
    });
    expect(result.resources).toEqual([
      expect.objectContaining({ name: "alpha", action: "unchanged" }),
      expect.objectContaining({ name: "gamma", error: "admission webhook denied the request" }),
    ]);
    expect(result.prune).toMatchObject({ state: "skipped", reason: "apply-failed" });
    expect(kube.find("KnativeServing", "beta")).toBeDefined();
  });
});

describe("sync: the admission step", () => {
  it("refuses a CR the settings no longer admit though it is unchanged on the hub", async () => {
    const kube = hub();
    const files = [crFile("alpha", { namespace: "fleet" })];
    const first = await syncInto(kube.client, { files, namespace: "fleet", commit: commit(1) });
    expect(first.resources).toEqual([expect.objectContaining({ name: "alpha", action: "create" })]);
    const same = await syncInto(kube.client, { files, namespace: "fleet", commit: commit(1) });
    expect(same.resources).toEqual([expect.objectContaining({ name: "alpha", action: "unchanged" })]);
    const refused = await syncInto(kube.client, {
      files,
      namespace: "fleet",
      commit: commit(1),
      settings: { crNamespaces: ["elsewhere"] },
    });
    expect(refused.resources).toEqual([
      expect.objectContaining({
        name: "alpha",
        action: "refused",
        error: expect.stringContaining("clusters/alpha.yaml:"),
      }),
    ]);
  });
});
