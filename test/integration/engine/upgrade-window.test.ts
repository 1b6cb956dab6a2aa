import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { decodeInventory } from "../../../src/apply/inventory.ts";
import { anchorName } from "../../../src/install/identity.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, type ObjectRef, objectKey, refKey } from "../../../src/kube/object.ts";
import type { Reconciler } from "../../../src/reconcile/start.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { deleteCrs, hubCr, KOURIER, startFleet } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";
import { applyWrites } from "./metrics.ts";

// The upstream operator's whole window, one minor at a time, on real spokes: Serving with Kourier on spoke-1
// and Eventing on spoke-2 go 1.20 -> 1.21 -> 1.22 -> 1.23. Each step is Ready at its release, what the
// release before had and this one has not is gone from the spoke, and what is not the install's is left as
// it was. A jump of two minors is refused, as upstream refuses it.

const sandbox = loadSandbox();
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const NAMESPACE = "upgrade-window-test";
const STEPS = [
  { minor: "1.20", serving: "1.20.3", eventing: "1.20.3" },
  { minor: "1.21", serving: "1.21.3", eventing: "1.21.4" },
  { minor: "1.22", serving: "1.22.1", eventing: "1.22.2" },
  { minor: "1.23", serving: "1.23.0", eventing: "1.23.0" },
] as const;

interface Install {
  cr: KubeObject;
  spoke: KubeClient;
  /** Where the install is on the spoke. */
  namespace: string;
  /** The anchor's inventory after the last step. */
  inventory: ObjectRef[];
  /** Objects on the spoke that are not the install's, with their resourceVersion when the test began. */
  bystanders: Map<KubeObject, string | undefined>;
}

describe("upgrades across the window, one minor at a time", () => {
  let hub: KubeClient;
  let reconciler: Reconciler;
  const installs = new Map<"serving" | "eventing", Install>();
  const timings: Record<string, number> = {};

  const statusOf = async (cr: KubeObject) => {
    const live = await hub.get(OPERATOR_API_VERSION, cr.kind, NAMESPACE, cr.metadata.name!);
    return live?.status as
      | { version?: string; conditions?: { type: string; status: string; message?: string }[] }
      | undefined;
  };
  const readyAt = (cr: KubeObject, version: string) =>
    waitUntil(
      `${cr.kind} Ready at ${version}`,
      async () => {
        const status = await statusOf(cr);
        const ready = status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
        return ready && status?.version === version ? true : undefined;
      },
      240_000,
    );
  const setVersion = (cr: KubeObject, version: string) =>
    hub.mergePatch(OPERATOR_API_VERSION, cr.kind, NAMESPACE, cr.metadata.name!, { spec: { version } });

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NAMESPACE);
    await cleanSpokes(sandbox, [spoke1.name, spoke2.name]);
    for (const [name, spoke, namespace, cr] of [
      [
        "serving",
        spoke1,
        "knative-serving",
        hubCr(sandbox, "KnativeServing", NAMESPACE, spoke1.name, KOURIER),
      ],
      ["eventing", spoke2, "knative-eventing", hubCr(sandbox, "KnativeEventing", NAMESPACE, spoke2.name, {})],
    ] as const) {
      const client = adminClient(spoke);
      // A team's own objects: one in the install's namespace, one beside it. No step may touch them.
      await ensureNamespace(client, namespace);
      const bystanders = [
        {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "team-settings", namespace },
          data: { a: "1" },
        },
        { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "team-settings", namespace: "default" } },
      ];
      const kept = new Map<KubeObject, string | undefined>();
      for (const object of bystanders)
        kept.set(object, (await client.apply(object)).metadata.resourceVersion as string | undefined);
      installs.set(name, { cr, spoke: client, namespace, inventory: [], bystanders: kept });
    }
    ({ reconciler } = await startFleet(sandbox));
  }, 300_000);

  afterAll(async () => {
    await reconciler?.stop();
    for (const { spoke, bystanders } of installs.values()) {
      for (const { metadata } of bystanders.keys()) {
        await spoke.delete("v1", "ConfigMap", metadata.namespace, metadata.name!);
      }
    }
    await cleanSpokes(sandbox, [spoke1.name, spoke2.name]);
    console.log("upgrade window figures:", JSON.stringify(timings));
  });

  it("each step is Ready at its release; what the release before had and this one has not is gone; bystanders untouched", async () => {
    for (const step of STEPS) {
      const started = Date.now();
      const serving = installs.get("serving")!;
      const eventing = installs.get("eventing")!;
      if (step === STEPS[0]) {
        for (const { cr } of [serving, eventing])
          await hub.apply({ ...cr, spec: { ...(cr.spec as object), version: step.minor } });
      } else {
        for (const { cr } of [serving, eventing]) await setVersion(cr, step.minor);
      }
      await Promise.all([readyAt(serving.cr, step.serving), readyAt(eventing.cr, step.eventing)]);
      timings[`ready${step.minor}Ms`] = Date.now() - started;

      for (const [name, install] of installs) {
        const release = name === "serving" ? step.serving : step.eventing;
        const { namespace } = install;
        const anchor = await install.spoke.get(
          "v1",
          "ConfigMap",
          namespace,
          anchorName({ kind: install.cr.kind, name: install.cr.metadata.name! }),
        );
        const inventory = decodeInventory(anchor);
        const now = new Set(inventory.map(refKey));
        // Dropped: the Jobs named for the release before (storage-version-migration-…-1.20.3, cleanup-…),
        // and whatever else the release no longer has. CRDs stay, as upstream leaves them.
        const dropped = install.inventory.filter(
          (ref) => !now.has(refKey(ref)) && ref.kind !== "CustomResourceDefinition",
        );
        if (step !== STEPS[0]) expect(dropped.length, `${name} ${step.minor}`).toBeGreaterThan(0);
        for (const ref of dropped) {
          expect(
            await install.spoke.get(ref.apiVersion, ref.kind, ref.namespace || undefined, ref.name),
            `${name} ${step.minor}: ${refKey(ref)} dropped`,
          ).toBeUndefined();
        }
        install.inventory = inventory;
        // Every Deployment runs the step's release (Kourier's at its own patch of the same minor).
        const deployments = await install.spoke.list("apps/v1", "Deployment", { namespace });
        for (const deployment of deployments.items) {
          const { labels } = deployment.metadata;
          const version = labels?.["app.kubernetes.io/version"] ?? "";
          const ingress = labels?.["networking.knative.dev/ingress-provider"] !== undefined;
          expect(ingress ? version.startsWith(`${step.minor}.`) : version === release, version).toBe(true);
        }
        for (const [object, resourceVersion] of install.bystanders) {
          const live = await install.spoke.get("v1", "ConfigMap", object.metadata.namespace, "team-settings");
          expect(live?.metadata.resourceVersion, `${name} ${step.minor}: ${objectKey(object)}`).toBe(
            resourceVersion,
          );
        }
      }
    }
  });

  it("a jump of two minors is refused and the spoke sees no write", async () => {
    // Eventing 1.23.0 is installed: 1.21 is two minors down.
    const { cr } = installs.get("eventing")!;
    await reconciler.controller.queue.idle();
    const writesBefore = await applyWrites(spoke2);
    await setVersion(cr, "1.21");
    const refusal = await waitUntil("VersionMigrationEligible=False", async () =>
      (await statusOf(cr))?.conditions?.find(
        (c) => c.type === "VersionMigrationEligible" && c.status === "False",
      ),
    );
    expect(refusal.message).toContain("multiple MINOR versions");
    expect(refusal.message).toContain("v1.23.0");
    await reconciler.controller.queue.idle();
    expect(await applyWrites(spoke2)).toBe(writesBefore);
    expect((await statusOf(cr))?.version).toBe("1.23.0");
  });

  it("removing the CRs uninstalls both; the bystanders stay", async () => {
    await deleteCrs(
      hub,
      [...installs.values()].map(({ cr }) => cr),
    );
    for (const install of installs.values()) {
      const anchor = anchorName({ kind: install.cr.kind, name: install.cr.metadata.name! });
      expect(await install.spoke.get("v1", "ConfigMap", install.namespace, anchor)).toBeUndefined();
      for (const object of install.bystanders.keys()) {
        expect(
          await install.spoke.get("v1", "ConfigMap", object.metadata.namespace, "team-settings"),
        ).toBeDefined();
      }
    }
  });
});
