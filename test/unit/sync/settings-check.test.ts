import { describe, expect, it } from "vitest";
import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { formatDiagnostic } from "../../../src/fleet/diagnostic.ts";
import type { FleetFile } from "../../../src/fleet/model.ts";
import { MirrorOptionsSchema } from "../../../src/mirror/decide.ts";
import { hubMirror } from "../../../src/mirror/mirror.ts";
import { createKodataSource, ReleaseLoader } from "../../../src/render/index.ts";
import { fixedPlacements, sync } from "../../../src/sync/sync.ts";
import { FakeKube } from "../../support/fake-kube.ts";
import { ANY_NAMESPACE_SETTINGS, crFile } from "../../support/fleet-files.ts";
import { knativeReleasesDir } from "../../support/shared.ts";

// The service's sync runs the settings check: a CR whose settings have an error fails its file as any error
// does (its hub CR keeps its last good state, nothing is pruned, the error is reported at file:line), and
// the other files of the same push are applied.

const NS = "fleet";
const releases = new ReleaseLoader(createKodataSource({ dir: knativeReleasesDir() }));
const fleet = { ...ANY_NAMESPACE_SETTINGS, defaultNamespace: NS, prune: MirrorOptionsSchema.parse({}) };

function syncFiles(hub: FakeKube, files: readonly FleetFile[], commit: string) {
  return sync(
    { source: { repository: "https://git.example/fleet.git", branch: "main", commit }, files },
    { fleet, kodataDir: undefined },
    {
      hub: hubMirror(hub.client, NS),
      placements: fixedPlacements({ clusters: [], decisions: [] }, fleet.departureGracePeriodMs),
      releases,
    },
  );
}

const alpha = (spec: Record<string, unknown>) =>
  crFile({ name: "alpha", namespace: NS, cluster: "spoke-1", spec });
const beta = (spec: Record<string, unknown>) =>
  crFile({ kind: "KnativeEventing", name: "beta", namespace: NS, cluster: "spoke-2", spec });
const gamma = crFile({ name: "gamma", namespace: NS, cluster: "spoke-3" });

describe("sync: the settings check", () => {
  it("a CR with a setting error is neither applied nor pruned; a good file of the same push is applied", async () => {
    const hub = new FakeKube().serveKindsOf(
      KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
    );
    const good = { config: { autoscaler: { "enable-scale-to-zero": "false" } } };
    await syncFiles(hub, [alpha(good), beta({}), gamma], "1".repeat(40));
    expect(hub.find("KnativeServing", "alpha")?.spec).toMatchObject(good);

    // The push: alpha's typo, beta's good change, gamma's file removed.
    const typo = alpha({ config: { autoscalr: { "enable-scale-to-zero": "false" } } });
    const changed = { config: { features: { "new-apiserversource-filters": "enabled" } } };
    const result = await syncFiles(hub, [typo, beta(changed)], "2".repeat(40));

    const line = typo.text.split("\n").findIndex((text) => text.includes("autoscalr:")) + 1;
    expect(result.diagnostics.map(formatDiagnostic)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^clusters/alpha\\.yaml:${line}:5 spec\\.config\\.autoscalr: .*did you mean autoscaler\\?`,
        ),
      ),
    ]);
    expect(result.failedFiles.map((file) => file.path)).toEqual(["clusters/alpha.yaml"]);
    // alpha keeps its last good state; beta's change is applied; gamma is not pruned behind the failed file.
    expect(hub.find("KnativeServing", "alpha")?.spec).toMatchObject(good);
    expect(hub.find("KnativeServing", "alpha")?.spec).not.toHaveProperty("config.autoscalr");
    expect(hub.find("KnativeEventing", "beta")?.spec).toMatchObject(changed);
    expect(result.prune.state).toBe("skipped");
    expect(hub.find("KnativeServing", "gamma")).toBeDefined();
  });

  it("a warning never blocks: the CR is applied and the warning reported", async () => {
    const hub = new FakeKube().serveKindsOf(
      KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
    );
    const ha = { "high-availability": { replicas: 2 } };
    const result = await syncFiles(hub, [alpha(ha)], "1".repeat(40));
    expect(result.diagnostics).toEqual([]);
    expect(result.warnings).toEqual([
      expect.objectContaining({ path: "clusters/alpha.yaml", severity: "warning" }),
      expect.objectContaining({ path: "clusters/alpha.yaml", severity: "warning" }),
    ]);
    expect(hub.find("KnativeServing", "alpha")?.spec).toMatchObject(ha);
  });

  it("the version the hub CR runs (status.version) makes a key the target drops a warning, not an error", async () => {
    const hub = new FakeKube().serveKindsOf(
      KNATIVE_KINDS.map((kind) => ({ apiVersion: OPERATOR_API_VERSION, kind, metadata: { name: "x" } })),
    );
    // klog-verbosity is documented in Eventing 1.23's config-logging and not in 1.22's.
    const logging = { config: { logging: { "klog-verbosity": "2" } } };
    const at = (version: string) =>
      crFile({
        kind: "KnativeEventing",
        name: "beta",
        namespace: NS,
        cluster: "spoke-2",
        version,
        spec: logging,
      });
    await syncFiles(hub, [at("1.23")], "1".repeat(40));
    const applied = hub.find("KnativeEventing", "beta")!;
    const running = (version: string) => hub.put({ ...applied, status: { version } });

    running("1.23.0");
    const back = await syncFiles(hub, [at("1.22")], "2".repeat(40));
    expect(back.diagnostics).toEqual([]);
    expect(back.warnings).toEqual([
      expect.objectContaining({
        field: "spec.config.logging.klog-verbosity",
        severity: "warning",
        message: expect.stringContaining("in the installed 1.23.0 release but not in 1.22"),
      }),
    ]);
    // Where 1.22 runs, the key was never in effect: an error.
    running("1.22.2");
    const never = await syncFiles(hub, [at("1.22")], "3".repeat(40));
    expect(never.diagnostics).toEqual([
      expect.objectContaining({ field: "spec.config.logging.klog-verbosity" }),
    ]);
  });
});
