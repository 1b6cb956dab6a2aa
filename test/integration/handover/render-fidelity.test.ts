import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type KnativeResource, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { containsDesired } from "../../../src/apply/compare.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { type KubeObject, nameOf } from "../../../src/kube/object.ts";
import { createKodataSource, ReleaseLoader, render } from "../../../src/render/index.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { hubCr, KOURIER } from "../../support/handover.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { knativeReleasesDir } from "../../support/shared.ts";
import {
  appliedByUpstream,
  prepareUpstreamHub,
  UpstreamOperator,
  waitConditions,
} from "../../support/upstream-operator.ts";

// Render fidelity: the real upstream operator installs a KnativeServing (1.23 + Kourier) and a KnativeEventing
// (1.23), the newest release it ships, on two spokes; every object it applied (its
// last-applied-configuration annotation records exactly what it sent) must be what src/render produces for
// the same CR, object by object, and the other way round.
//
// Compared with Kubernetes' own equality of what was sent: a zero value equals an absent field (Go's
// omitempty re-encodes upstream's objects), quantities by value, lists keyed by `name` (env, ports) by key.
// Fields ignored, each for a stated reason:
// - ownerReferences: they name the anchor's uid, different per install (both point at the anchor);
// - the `manifestival` annotation: manifestival's own marker of the objects it created, not release content;
// - `status`: Go's typed round trip adds an empty status to what upstream sends; the server ignores it;
// - `rules` of an aggregated ClusterRole (one with an aggregationRule): upstream copies the rules the
//   aggregation controller computed on the cluster into what it sends, so as not to wipe them; the
//   controller owns them, and knative-fleet leaves them to it.
// - labels ours has on the install Namespace and upstream's record lacks: upstream applies Serving's Namespace
//   and its ingress's (both renamed to the install namespace), and which one it recorded last depends on its
//   reconcile's timing (after a loaded test file, Serving's; otherwise the ingress's, as ours);
// - the env of pingsource-mt-adapter is compared by name: upstream carries over the values the Eventing
//   controller filled in on the live Deployment (its PingsourceMTAadapterTransform), in the order it finds.

const sandbox = loadSandbox();
const [spoke1, spoke2] = sandbox.spokes as [(typeof sandbox.spokes)[0], (typeof sandbox.spokes)[0]];
const hubNs = "handover-render";

const servingCr = hubCr(sandbox, "KnativeServing", hubNs, spoke1.name, { version: "1.23", ...KOURIER });
const eventingCr = hubCr(sandbox, "KnativeEventing", hubNs, spoke2.name, { version: "1.23" });

/** `object` without the fields ignored above, and with name-keyed lists as maps, for comparison. */
function comparable(object: KubeObject): unknown {
  const { status: _status, ...rest } = structuredClone(object) as KubeObject & { status?: unknown };
  delete rest.metadata.ownerReferences;
  if (rest.metadata.annotations) {
    delete rest.metadata.annotations.manifestival;
    if (Object.keys(rest.metadata.annotations).length === 0) delete rest.metadata.annotations;
  }
  if (rest.kind === "ClusterRole" && rest.aggregationRule !== undefined) delete rest.rules;
  return byName(rest);
}

function byName(value: unknown): unknown {
  if (Array.isArray(value)) {
    const keyed = value.every((v) => typeof v === "object" && v !== null && typeof v.name === "string");
    return keyed && value.length > 0
      ? Object.fromEntries(value.map((v: { name: string }) => [v.name, byName(v)]))
      : value.map(byName);
  }
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, byName(v)]));
  }
  return value;
}

/** Where two objects differ, as `path: upstream=… ours=…` lines (empty when they are equal). */
function differences(upstream: unknown, ours: unknown, path = ""): string[] {
  if (containsDesired(upstream, ours) && containsDesired(ours, upstream)) return [];
  const isMap = (v: unknown): v is Record<string, unknown> =>
    typeof v === "object" && v !== null && !Array.isArray(v);
  if (isMap(upstream) && isMap(ours)) {
    return [...new Set([...Object.keys(upstream), ...Object.keys(ours)])].flatMap((k) =>
      differences(upstream[k], ours[k], `${path}.${k}`),
    );
  }
  const show = (v: unknown) => JSON.stringify(v)?.slice(0, 300);
  return [`${path}: upstream=${show(upstream)} ours=${show(ours)}`];
}

const key = (o: KubeObject) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;

describe("render fidelity against the real upstream operator", () => {
  let hub: KubeClient;
  let upstream: UpstreamOperator;
  const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await prepareUpstreamHub(hub);
    await ensureNamespace(hub, hubNs);
    upstream = new UpstreamOperator({
      kubeconfig: sandbox.hub.adminKubeconfig,
      providerFile: sandbox.providerFile,
      logFile: join(mkdtempSync(join(tmpdir(), "upstream-render-")), "operator.log"),
      pollInterval: "1s",
    });
    await upstream.waitStarted();
    await hub.apply(servingCr);
    await hub.apply(eventingCr);
    await Promise.all([
      waitConditions(hub, "KnativeServing", hubNs, "serving", { Ready: "True" }),
      waitConditions(hub, "KnativeEventing", hubNs, "eventing", { Ready: "True" }),
    ]);
  });

  afterAll(async () => {
    // Upstream removes its own installs (its finalizer), so the spokes are clean for the next file.
    await hub?.delete(OPERATOR_API_VERSION, "KnativeServing", hubNs, "serving").catch(() => {});
    await hub?.delete(OPERATOR_API_VERSION, "KnativeEventing", hubNs, "eventing").catch(() => {});
    for (const kind of ["KnativeServing", "KnativeEventing"]) {
      for (let i = 0; i < 120; i++) {
        if ((await hub.list(OPERATOR_API_VERSION, kind, { namespace: hubNs })).items.length === 0) break;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    await upstream?.stop();
  });

  for (const [cr, spokeOf] of [
    [servingCr, () => adminClient(spoke1)],
    [eventingCr, () => adminClient(spoke2)],
  ] as const) {
    it(`${cr.kind} 1.23: every object upstream applied is the one src/render produces, and no other`, async () => {
      const spoke = spokeOf();
      const resource = cr as unknown as KnativeResource;
      // This upstream commit installs into the hub CR's namespace on the spoke: render for that namespace.
      const ours = render(resource, await releases.load(resource)) as KubeObject[];
      const mismatches: string[] = [];
      for (const object of ours) {
        const live = await spoke.get(
          object.apiVersion,
          object.kind,
          object.metadata.namespace,
          nameOf(object),
        );
        const sent = live && appliedByUpstream(live);
        if (!sent) {
          mismatches.push(`${key(object)}: not applied by upstream`);
          continue;
        }
        for (const line of differences(comparable(sent), comparable(object))) {
          if (object.kind === "Namespace" && /^\.metadata\.labels\.\S+: upstream=undefined /.test(line))
            continue;
          mismatches.push(`${key(object)} ${line}`);
        }
      }
      // The other way round: nothing upstream applied in the install namespace is missing from our render.
      // (Cluster-scoped objects are shared by every install a spoke ever had, so only the forward check above
      // covers them.)
      const rendered = new Set(ours.map(key));
      const namespaced = new Map(
        ours.filter((o) => o.metadata.namespace === hubNs).map((o) => [`${o.apiVersion}/${o.kind}`, o]),
      );
      for (const sample of namespaced.values()) {
        const list = await spoke.list(sample.apiVersion, sample.kind, { namespace: hubNs });
        for (const live of list.items) {
          if (appliedByUpstream(live) && !rendered.has(key(live)))
            mismatches.push(`${key(live)}: not rendered`);
        }
      }
      expect(mismatches).toEqual([]);
      expect(ours.length).toBeGreaterThan(50);
    });
  }

  it("status.manifests: knative-fleet records the locations upstream records", async () => {
    for (const cr of [servingCr, eventingCr]) {
      const live = await hub.get(OPERATOR_API_VERSION, cr.kind, hubNs, nameOf(cr));
      const release = await releases.load(cr as unknown as KnativeResource);
      expect((live?.status as { manifests?: string[] } | undefined)?.manifests).toEqual(release.locations);
    }
  });

  it("upstream logged no error", () => {
    expect(upstream.errors([hubNs])).toEqual([]);
  });
});
