import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_SOURCES, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import {
  anchorNamespaces,
  deleteCrs,
  hubCr,
  KOURIER,
  startFleet,
  startUpstream,
  waitFleetReady,
} from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import {
  prepareUpstreamHub,
  type UpstreamOperator,
  waitConditions,
} from "../../support/upstream-operator.ts";

// Hand-over 2: knative-fleet installs Serving 1.22 (Kourier, plus one additional manifest) and Eventing 1.22;
// it is stopped; the real upstream operator takes the same CRs over, then upgrades them to 1.23, the newest
// release it ships, with the additional manifest dropped. Upstream must reach Ready with no error in its log,
// and on the upgrade remove what the 1.22 install had and 1.23 does not (it finds that through the
// status.manifests knative-fleet wrote).
//
// The hub CRs live in knative-serving / knative-eventing: this upstream commit installs into the hub CR's
// namespace on the spoke, so only there does it find the install knative-fleet made (the canonical layout).

const sandbox = loadSandbox();
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const OBSOLETE = "handover-obsolete";

describe("hand-over from knative-fleet to the upstream operator", () => {
  let hub: KubeClient;
  let spokeOne: KubeClient;
  let spokeTwo: KubeClient;
  let upstream: UpstreamOperator | undefined;
  let fleet: Awaited<ReturnType<typeof startFleet>> | undefined;
  const figures: Record<string, number> = {};
  // The additional manifest is served on loopback (both reconcilers fetch it; knative-fleet's location
  // policy admits exactly this prefix), and stays served: upstream reads it back at its upgrade.
  const obsoleteManifest = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${OBSOLETE}\n  namespace: knative-serving\ndata:\n  a: "1"\n`;
  let manifestServer: Server | undefined;
  let serving: ReturnType<typeof hubCr>;
  // With an event source enabled: upstream installs spec.source from the same kodata folder knative-fleet did.
  const eventing = hubCr(sandbox, "KnativeEventing", "knative-eventing", spoke2.name, {
    version: "1.22",
    source: Object.fromEntries(EVENT_SOURCES.map((name) => [name, { enabled: name === "redis" }])),
  });
  const redisController = () =>
    spokeTwo.get("apps/v1", "StatefulSet", "knative-eventing", "redis-controller-manager");

  beforeAll(async () => {
    manifestServer = createServer((req, res) => {
      if (req.url !== "/obsolete.yaml") return void res.writeHead(404).end();
      res.writeHead(200, { "content-type": "application/yaml" }).end(obsoleteManifest);
    });
    await new Promise<void>((resolve) => manifestServer!.listen(0, "127.0.0.1", resolve));
    const prefix = `http://127.0.0.1:${(manifestServer.address() as AddressInfo).port}/`;
    serving = hubCr(sandbox, "KnativeServing", "knative-serving", spoke1.name, {
      version: "1.22",
      ...KOURIER,
      additionalManifests: [{ URL: `${prefix}obsolete.yaml` }],
    });
    hub = adminClient(sandbox.hub);
    spokeOne = adminClient(spoke1);
    spokeTwo = adminClient(spoke2);
    await installFleetCrds(hub);
    await prepareUpstreamHub(hub);
    await ensureNamespace(hub, "knative-serving");
    await ensureNamespace(hub, "knative-eventing");
    fleet = await startFleet(sandbox, {
      providerFile: sandbox.providerFile,
      manifestLocations: { allowedPrefixes: [prefix], allowHttp: true, allowPrivateNetworks: true },
    });
    await hub.apply(serving);
    await hub.apply(eventing);
    await Promise.all([
      waitFleetReady(fleet.reports, "KnativeServing", "knative-serving", "serving"),
      waitFleetReady(fleet.reports, "KnativeEventing", "knative-eventing", "eventing"),
    ]);
    await fleet.reconciler.stop();
    fleet = undefined;
  });

  afterAll(async () => {
    if (!upstream?.running) upstream = await startUpstream(sandbox).catch(() => undefined);
    await deleteCrs(hub, [serving, eventing]).catch(() => {});
    // Leave the spokes as found, whatever upstream's finalizer left: without the anchors the spokes' garbage
    // collectors remove the rest, and the next test file finds no install of these CRs.
    for (const [spoke, kind, namespace, name] of [
      [spokeOne, "KnativeServing", "knative-serving", "serving"],
      [spokeTwo, "KnativeEventing", "knative-eventing", "eventing"],
    ] as const) {
      await spoke
        ?.delete("v1", "ConfigMap", namespace, `${kind.toLowerCase()}-${name}-root-owner`)
        .catch(() => {});
    }
    await upstream?.stop();
    await fleet?.reconciler.stop();
    manifestServer?.close();
    console.log("knative-fleet -> upstream figures:", JSON.stringify(figures));
  });

  it("upstream takes the same CRs over: Ready, its own reconcile succeeded, no error in its log", async () => {
    expect(await spokeOne.get("v1", "ConfigMap", "knative-serving", OBSOLETE)).toBeDefined();
    const started = Date.now();
    upstream = await startUpstream(sandbox);
    await Promise.all([
      upstream.waitReconciled("knative-serving", "serving"),
      upstream.waitReconciled("knative-eventing", "eventing"),
    ]);
    figures.takeOverReadyMs = Date.now() - started;
    await waitConditions(hub, "KnativeServing", "knative-serving", "serving", { Ready: "True" });
    await waitConditions(hub, "KnativeEventing", "knative-eventing", "eventing", { Ready: "True" });
    expect(await anchorNamespaces(spokeOne, "KnativeServing", "serving")).toEqual(["knative-serving"]);
    expect(
      await redisController(),
      "the redis source knative-fleet installed, kept by upstream",
    ).toBeDefined();
    expect(upstream.errors(["knative-serving", "knative-eventing"])).toEqual([]);
  });

  it("on its next upgrade (1.22 -> 1.23) upstream removes what the old install had and the new one does not", async () => {
    const started = Date.now();
    await hub.mergePatch(OPERATOR_API_VERSION, "KnativeServing", "knative-serving", "serving", {
      spec: { version: "1.23", additionalManifests: null },
    });
    await hub.mergePatch(OPERATOR_API_VERSION, "KnativeEventing", "knative-eventing", "eventing", {
      spec: { version: "1.23" },
    });
    const versionIs = async (kind: string, namespace: string, name: string, version: string) => {
      const { conditions } = await waitConditions(hub, kind, namespace, name, { Ready: "True" });
      const live = await hub.get(OPERATOR_API_VERSION, kind, namespace, name);
      return (live?.status as { version?: string } | undefined)?.version === version ? conditions : undefined;
    };
    for (const [kind, namespace, name, version] of [
      ["KnativeServing", "knative-serving", "serving", "1.23.0"],
      ["KnativeEventing", "knative-eventing", "eventing", "1.23.0"],
    ] as const) {
      const deadline = Date.now() + 180_000;
      while (!(await versionIs(kind, namespace, name, version))) {
        if (Date.now() > deadline) throw new Error(`${kind} did not reach ${version}:\n${upstream?.tail()}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    figures.upgradeReadyMs = Date.now() - started;
    // DeleteObsoleteResources runs after the install stage: wait for it rather than race it.
    const deadline = Date.now() + 60_000;
    while (await spokeOne.get("v1", "ConfigMap", "knative-serving", OBSOLETE)) {
      if (Date.now() > deadline) throw new Error(`${OBSOLETE} was not removed:\n${upstream?.tail()}`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const live = await hub.get(OPERATOR_API_VERSION, "KnativeServing", "knative-serving", "serving");
    expect(
      (live?.status as { manifests?: string[] } | undefined)?.manifests?.some((m) =>
        m.endsWith("/knative-serving/1.23.0"),
      ),
    ).toBe(true);
    expect((await redisController())?.metadata.labels?.["contrib.eventing.knative.dev/release"]).toBe(
      "v1.23.0",
    );
    expect(upstream?.errors(["knative-serving", "knative-eventing"])).toEqual([]);
  });
});
