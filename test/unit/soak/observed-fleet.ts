import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { CR_KIND_LABEL, CR_NAME_LABEL, MANAGED_BY, MANAGED_BY_LABEL } from "../../../src/api/labels.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { type SoakContext, SoakFleet } from "../../soak/fleet.ts";
import { type FleetFiles, MARKER_KEY } from "../../soak/model.ts";
import { Observer } from "../../soak/observer.ts";
import { FakeKube } from "../../support/fake-kube.ts";

// The observer's unit tests' fleet: one leader fleet over in-memory clients.

export const SPOKE = "spoke-1";

/**
 * A leader fleet of one spoke over an in-memory hub, with no placement: one KnativeServing expected. The
 * observer is told `hubPort` and the spokes' proxy's open requests when given.
 */
export function observedFleet(
  options: { id?: string; hubPort?: number; openSpokeRequests?: () => string[] } = {},
) {
  const hub = new FakeKube().serveKindsOf([
    { apiVersion: OPERATOR_API_VERSION, kind: "KnativeServing", metadata: {} },
    { apiVersion: OPERATOR_API_VERSION, kind: "KnativeEventing", metadata: {} },
  ]);
  const spoke = new FakeKube().serveKindsOf([{ apiVersion: "v1", kind: "ConfigMap", metadata: {} }]);
  const context = { hub: hub.client, workDir: mkdtempSync(join(tmpdir(), "soak-checks-")) };
  const fleet = new SoakFleet(context as unknown as SoakContext, {
    id: options.id ?? "a",
    mode: "leader",
    replicas: 1,
    spokes: [SPOKE],
  });
  fleet.files = { ...fleet.files, placement: undefined };
  (fleet as unknown as { recordContents(files: FleetFiles): void }).recordContents(fleet.files);
  const observer = new Observer({
    hub: hub.client,
    fleets: [fleet],
    spokes: new Map([[SPOKE, spoke.client]]),
    hubPort: options.hubPort ?? 0,
    openSpokeRequests: options.openSpokeRequests ?? (() => []),
    step: () => "a unit test",
  });
  const pushed = fleet.files.serving.get(SPOKE)!;
  const name = `serving-${SPOKE}`;
  /** The hub CR as the fleet's sync writes it, Ready on its generation when `healthy`. */
  const cr = (content: { version: string; marker: number }, healthy = true): KubeObject => ({
    apiVersion: OPERATOR_API_VERSION,
    kind: "KnativeServing",
    metadata: { name, namespace: fleet.layout.namespace, generation: 2 },
    spec: {
      version: content.version,
      config: { observability: { [MARKER_KEY]: String(content.marker) } },
      clusterProfileRef: { namespace: fleet.layout.profileNamespace, name: SPOKE },
    },
    status: {
      observedGeneration: 2,
      version: `${content.version}.0`,
      conditions: ["Ready", "DeploymentsAvailable"].map((type) => ({
        type,
        status: healthy ? "True" : "False",
      })),
    },
  });
  /** What the install on the spoke says: its marker, and the anchor naming its CR. */
  const installed = (marker: number, crName = name) => {
    spoke.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "config-observability", namespace: "knative-serving" },
      data: { [MARKER_KEY]: String(marker) },
    });
    spoke.put({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: `${crName}-root-owner`,
        namespace: "knative-serving",
        labels: {
          [MANAGED_BY_LABEL]: MANAGED_BY,
          [CR_KIND_LABEL]: "knativeserving",
          [CR_NAME_LABEL]: crName,
        },
      },
    });
  };
  const hooks = observer as unknown as {
    onHubCr(fleet: SoakFleet, event: string, object: KubeObject): Promise<void>;
    sampleSpokes(): Promise<void>;
    sampleReplicas(): Promise<void>;
    sampleResources(): Promise<void>;
  };
  return { hub, spoke, fleet, observer, hooks, pushed, cr, installed };
}

/** A rollout of commit c0 under way since `startedAt` in `fleet`'s rollout state on `hub`, with these CR records. */
export function putRolloutState(
  hub: FakeKube,
  fleet: SoakFleet,
  startedAt: number,
  crs: Record<string, unknown>,
): void {
  hub.put({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: fleet.layout.namespace },
    data: {
      state: JSON.stringify({
        schema: 2,
        phase: "Progressing",
        commit: "c0",
        startedAt: new Date(startedAt).toISOString(),
        waves: {},
        crs,
      }),
    },
  });
}
