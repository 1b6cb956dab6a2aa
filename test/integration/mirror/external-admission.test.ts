import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import type { KubeClient } from "../../../src/kube/client.ts";
import { nameOf } from "../../../src/kube/object.ts";
import { loadServiceConfig } from "../../../src/service/config.ts";
import type { FleetService } from "../../../src/service/service.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { type CrOptions, crText } from "../../support/fleet-files.ts";
import { startServiceOnSandbox, writeServiceConfig } from "../../support/fleet-service.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { waitUntil } from "../../support/wait.ts";

// `reconciler: external`: no engine of knative-fleet runs, the upstream operator acts on whatever the hub
// holds. The mirror's admission (src/admission) is then the only check between a fleet file and the hub:
// a metadata-service URL, another team's ClusterProfile namespace and a CR in a hub namespace outside the
// tenancy never reach the hub; the status file says why, file and line; the good CR is mirrored. No
// upstream operator is needed to see what the hub is given.

const sandbox = loadSandbox();
const NS = "external-admission";
const REPO = "external-admission-fleet";

describe("reconciler: external gets the same admission as the engine", () => {
  let hub: KubeClient;
  let git: GitServer;
  let service: FleetService | undefined;

  beforeAll(async () => {
    hub = adminClient(sandbox.hub);
    await installFleetCrds(hub);
    await ensureNamespace(hub, NS);
    await ensureNamespace(hub, "team-b");
    git = await startGitServer();
    // Each on a cluster of its own: one cluster runs one CR of a kind (fleet validation).
    const cr = (name: string, more: Partial<CrOptions>) =>
      crText({ name, namespace: NS, cluster: `spoke-of-${name}`, version: "1.22", ...more });
    await git.createRepo(REPO, {
      "clusters/metadata.yaml": cr("metadata", {
        spec: { manifests: [{ URL: "http://169.254.169.254/latest/meta-data/iam/security-credentials/" }] },
      }),
      "clusters/other-team.yaml": cr("other-team", { clusterNamespace: "team-b" }),
      "clusters/elsewhere.yaml": cr("elsewhere", { namespace: "team-b" }),
      "clusters/fine.yaml": cr("fine", {}),
    });
    const config = loadServiceConfig(writeServiceConfig({ repositoryUrl: git.url(REPO), namespace: NS }));
    service = await startServiceOnSandbox(
      sandbox,
      { ...config, reconciler: "external" },
      "external-admission",
    );
  }, 300_000);

  afterAll(async () => {
    await service?.stop();
    for (const namespace of [NS, "team-b"])
      for (const cr of (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace })).items)
        await hub.delete(OPERATOR_API_VERSION, "KnativeServing", namespace, nameOf(cr)).catch(() => {});
    await hub.delete("v1", "Namespace", undefined, NS).catch(() => {});
    await hub.delete("v1", "Namespace", undefined, "team-b").catch(() => {});
    await git?.close();
  });

  it("refuses them as the engine would, with file, line and field; the rest is mirrored", async () => {
    const status = await waitUntil(
      "the status file",
      async () => {
        const text = await git.readFile(REPO, "main", "status/fleet.yaml").catch(() => undefined);
        return text && (parse(text) as { applyErrors?: unknown[] }).applyErrors?.length === 3
          ? (parse(text) as { applyErrors: { name: string; error: string }[] })
          : undefined;
      },
      120_000,
    );
    expect(Object.fromEntries(status.applyErrors.map((e) => [e.name, e.error]))).toEqual({
      metadata:
        "clusters/metadata.yaml:1: spec.manifests[0].URL: manifest location " +
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/ is refused: it matches no prefix in " +
        "manifestLocations.allowedPrefixes (none is set)",
      "other-team":
        "clusters/other-team.yaml:1: spec.clusterProfileRef.namespace: ClusterProfiles in namespace team-b may " +
        "not be targeted (allowedClusterProfileNamespaces: fleet-system)",
      elsewhere:
        "clusters/elsewhere.yaml:1: metadata.namespace: team-b is not a hub namespace whose CRs knative-fleet " +
        `reconciles (tenancy.crNamespaces: ${NS}); delete the metadata.namespace line (the CR then goes to ` +
        "the fleet's namespace), or add team-b to tenancy.crNamespaces in the service's config (the chart's value " +
        "tenancy.crNamespaces)",
    });
    const onHub = async (namespace: string) =>
      (await hub.list(OPERATOR_API_VERSION, "KnativeServing", { namespace })).items.map(nameOf);
    expect(await onHub(NS)).toEqual(["fine"]);
    expect(await onHub("team-b")).toEqual([]);
  });
});
