import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { main } from "../../../src/commands/main.ts";
import type { StatusRow } from "../../../src/commands/status.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { nameOf } from "../../../src/kube/object.ts";
import { isNotFound } from "../../../src/kube/rest.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { runCli } from "../../support/cli.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { writeTokenKubeconfig } from "../../support/kubeconfig.ts";
import { waitUntil } from "../../support/wait.ts";

// CRs written straight to the hub, status included, with no engine running: the command reads only what
// the hub holds, so each state it shows is set up exactly. A namespace of its own keeps exit codes
// independent of CRs other tests leave behind.
const NAMESPACE = "status-cmd-test";
const COMMIT = "89abcdef0123456789abcdef0123456789abcdef";
const FINALIZER = "knativeeventings.operator.knative.dev";
const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);

/** `knative-fleet status --kubeconfig <kubeconfig> ...args` through the CLI's entry point. */
const statusWith = (kubeconfig: string, ...args: string[]) =>
  runCli("status", "--kubeconfig", kubeconfig, ...args);

const status = (...args: string[]) => statusWith(sandbox.hub.adminKubeconfig, ...args);

async function statusJson(...args: string[]): Promise<{ code: number; rows: StatusRow[] }> {
  const { code, stdout } = await status("--output", "json", ...args);
  const { schemaVersion, items } = JSON.parse(stdout) as { schemaVersion: number; items: StatusRow[] };
  expect(schemaVersion).toBe(1);
  return { code, rows: items };
}

const allTrue = (...types: string[]) => types.map((type) => ({ type, status: "True" }));
const DEPENDENCIES = [
  "DependenciesInstalled",
  "DeploymentsAvailable",
  "InstallSucceeded",
  "TargetClusterResolved",
  "VersionMigrationEligible",
];

function knative(kind: string, name: string, fields: Partial<KubeObject> = {}): KubeObject {
  return {
    apiVersion: OPERATOR_API_VERSION,
    kind,
    metadata: { name, namespace: NAMESPACE },
    spec: {},
    ...fields,
  };
}

/** Writes `status` through the status subresource, as the hub controller does, for the CR's current generation. */
async function writeStatus(object: KubeObject, status: Record<string, unknown>): Promise<void> {
  const live = await hub.get(OPERATOR_API_VERSION, object.kind, NAMESPACE, nameOf(object));
  await hub.apply(
    {
      apiVersion: OPERATOR_API_VERSION,
      kind: object.kind,
      metadata: { name: object.metadata.name, namespace: NAMESPACE },
      status: { observedGeneration: live!.metadata.generation, ...status },
    },
    { subresource: "status" },
  );
}

const serving = knative("KnativeServing", "serving", {
  metadata: {
    name: "serving",
    namespace: NAMESPACE,
    annotations: {
      "fleet.knative.dev/source-path": "clusters/spoke-1/serving.yaml",
      "fleet.knative.dev/source-commit": COMMIT,
    },
  },
  spec: { clusterProfileRef: { namespace: "fleet-system", name: "spoke-1" } },
});
const eventing = knative("KnativeEventing", "eventing");
const leaving = knative("KnativeEventing", "leaving", {
  metadata: { name: "leaving", namespace: NAMESPACE, finalizers: [FINALIZER] },
  spec: { clusterProfileRef: { namespace: "fleet-system", name: "gone" } },
});

beforeAll(async () => {
  await installFleetCrds(hub);
  // A run just before this one may have left the namespace terminating; nothing can be created in it then.
  await waitUntil("namespace from an earlier run to be gone", async () => {
    const namespace = await hub.get("v1", "Namespace", undefined, NAMESPACE);
    return namespace?.metadata.deletionTimestamp ? undefined : true;
  });
  await ensureNamespace(hub, NAMESPACE);
  for (const object of [serving, eventing]) await hub.apply(object);
  await writeStatus(serving, {
    version: "1.22.0",
    conditions: allTrue("Ready", ...DEPENDENCIES),
  });
  await writeStatus(eventing, {
    conditions: [
      ...allTrue("DependenciesInstalled", "TargetClusterResolved", "VersionMigrationEligible"),
      { type: "DeploymentsAvailable", status: "Unknown", reason: "Waiting" },
      {
        type: "InstallSucceeded",
        status: "False",
        reason: "InstallFailed",
        message: "apply eventing-core: webhook refused",
      },
      {
        type: "Ready",
        status: "False",
        reason: "InstallFailed",
        message: "apply eventing-core: webhook refused",
      },
    ],
  });
});

afterAll(async () => {
  // The finalizer has no controller behind it here: drop it, or the CR (and the namespace) never goes.
  await hub
    .mergePatch(OPERATOR_API_VERSION, leaving.kind, NAMESPACE, nameOf(leaving), {
      metadata: { finalizers: null },
    })
    .catch((err: unknown) => {
      if (!isNotFound(err)) throw err; // the deletion test did not get to create it
    });
  for (const object of [serving, eventing, leaving])
    await hub.delete(OPERATOR_API_VERSION, object.kind, NAMESPACE, nameOf(object));
  await hub.delete("v1", "Namespace", undefined, NAMESPACE);
});

describe("knative-fleet status", () => {
  it("lists the CRs of a namespace as JSON, sorted, and exits 1 while one is not Ready", async () => {
    const { code, rows } = await statusJson("-n", NAMESPACE);
    expect(code).toBe(1);
    expect(rows).toEqual([
      {
        cluster: "fleet-system/spoke-1",
        kind: "KnativeServing",
        namespace: NAMESPACE,
        name: "serving",
        phase: "Current",
        ready: "True",
        version: "1.22.0",
        generation: 1,
        observedGeneration: 1,
        stale: false,
        path: "clusters/spoke-1/serving.yaml",
        commit: COMMIT,
      },
      {
        cluster: "hub",
        kind: "KnativeEventing",
        namespace: NAMESPACE,
        name: "eventing",
        phase: "Failed",
        ready: "False",
        condition: "InstallSucceeded",
        reason: "InstallFailed",
        message: "InstallSucceeded=False (InstallFailed: apply eventing-core: webhook refused)",
        generation: 1,
        observedGeneration: 1,
        stale: false,
      },
    ]);
  });

  it("prints the same as a table (-o wide: with generations and source)", async () => {
    const narrow = await status("-n", NAMESPACE);
    expect(narrow.stdout.split("\n")[0]).toMatch(/^CLUSTER\s+KIND\s+CR\s+READY\s+VERSION\s+STATUS$/);
    expect(narrow.stdout).toContain("InstallFailed: apply eventing-core: webhook refused");
    const { code, stdout, stderr } = await status("-n", NAMESPACE, "-o", "wide");
    expect(code).toBe(1);
    expect(stderr).toBe("");
    const [header, ...lines] = stdout.trimEnd().split("\n");
    expect(header).toMatch(/^CLUSTER\s+KIND\s+CR\s+READY\s+VERSION\s+GENERATION\s+SOURCE\s+DRIFT\s+STATUS$/);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      new RegExp(
        `^fleet-system/spoke-1\\s+KnativeServing\\s+${NAMESPACE}/serving\\s+True\\s+1\\.22\\.0\\s+1/1\\s+` +
          "clusters/spoke-1/serving\\.yaml@89abcde\\s+-\\s+Current$",
      ),
    );
    expect(lines[1]).toMatch(
      new RegExp(
        `^hub\\s+KnativeEventing\\s+${NAMESPACE}/eventing\\s+False\\s+-\\s+1/1\\s+-\\s+-\\s+` +
          "Failed: InstallSucceeded=False \\(InstallFailed: apply eventing-core: webhook refused\\)$",
      ),
    );
  });

  it("exits 0 once every CR is Ready, and 1 again while the controller is behind a spec change", async () => {
    await writeStatus(eventing, { version: "1.22.0", conditions: allTrue("Ready", ...DEPENDENCIES) });
    expect((await status("-n", NAMESPACE)).code).toBe(0);

    await hub.apply({ ...eventing, spec: { version: "1.22" } });
    const { code, rows } = await statusJson("-n", NAMESPACE);
    expect(code).toBe(1);
    expect(rows.find((row) => row.name === "eventing")).toMatchObject({
      ready: "True",
      generation: 2,
      observedGeneration: 1,
      stale: true,
    });
    expect((await status("-n", NAMESPACE, "-o", "wide")).stdout).toMatch(
      /eventing\s+True\s+1\.22\.0\s+1\/2 stale\s/,
    );

    await writeStatus(eventing, { version: "1.22.0", conditions: allTrue("Ready", ...DEPENDENCIES) });
    expect((await status("-n", NAMESPACE)).code).toBe(0);
  });

  it("shows a deletion stuck on an unresolvable cluster with the command that releases it", async () => {
    await hub.apply(leaving);
    await writeStatus(leaving, {
      conditions: [
        ...allTrue(
          "DependenciesInstalled",
          "DeploymentsAvailable",
          "InstallSucceeded",
          "VersionMigrationEligible",
        ),
        { type: "Ready", status: "False", reason: "ClusterProfileNotReady", message: "spoke down" },
        {
          type: "TargetClusterResolved",
          status: "False",
          reason: "ClusterProfileNotReady",
          message: "spoke down",
        },
      ],
    });
    await hub.delete(OPERATOR_API_VERSION, leaving.kind, NAMESPACE, nameOf(leaving));
    await waitUntil("the CR to be marked for deletion", async () =>
      (await hub.get(OPERATOR_API_VERSION, leaving.kind, NAMESPACE, nameOf(leaving)))?.metadata
        .deletionTimestamp
        ? true
        : undefined,
    );

    const { code, rows } = await statusJson("-n", NAMESPACE);
    expect(code).toBe(1);
    const command = `kubectl -n ${NAMESPACE} annotate knativeeventing leaving fleet.knative.dev/abandon-cleanup=true`;
    expect(rows.find((row) => row.name === "leaving")).toMatchObject({
      cluster: "fleet-system/gone",
      phase: "Terminating",
      reason: "Deleting",
      deleting: { finalizers: [FINALIZER], abandonCommand: command },
    });
    const { stdout } = await status("-n", NAMESPACE);
    expect(stdout).toContain(
      `Terminating (finalizer ${FINALIZER} pending): the CR is being deleted; its cluster is being cleaned up; ` +
        "TargetClusterResolved=False (ClusterProfileNotReady: spoke down)",
    );
    expect(stdout).toContain(`\n  ${command}\n`);
  });

  it("-o yaml prints the rows -o json prints", async () => {
    const json = await statusJson("-n", NAMESPACE);
    const yaml = await status("-n", NAMESPACE, "-o", "yaml");
    expect(yaml.code).toBe(json.code);
    expect(parse(yaml.stdout)).toEqual({ schemaVersion: 1, items: json.rows });
  });

  it("-w prints the listing again when a CR changes, and exits with the last listing's code", async () => {
    const stop = new AbortController();
    const printed: string[] = [];
    const sink = {
      write: (chunk: unknown) => printed.push(String(chunk)) > 0,
    } as unknown as NodeJS.WritableStream;
    const watching = main(["status", "--kubeconfig", sandbox.hub.adminKubeconfig, "-n", NAMESPACE, "-w"], {
      stdout: sink,
      stderr: sink,
      signal: stop.signal,
    });
    await waitUntil("the first listing", async () =>
      printed.join("").includes("eventing") ? true : undefined,
    );
    const first = printed.join("");
    await writeStatus(eventing, {
      version: "1.22.0",
      conditions: [
        ...allTrue(
          "DependenciesInstalled",
          "DeploymentsAvailable",
          "TargetClusterResolved",
          "VersionMigrationEligible",
        ),
        { type: "InstallSucceeded", status: "False", reason: "InstallFailed", message: "watched change" },
        { type: "Ready", status: "False", reason: "InstallFailed", message: "watched change" },
      ],
    });
    const again = await waitUntil("the listing printed again", async () => {
      const text = printed.join("").slice(first.length);
      return text.includes("InstallFailed: watched change") ? text : undefined;
    });
    // The whole listing again, after a blank line: the header and every CR, not only the changed one.
    expect(again).toMatch(/^\nCLUSTER\s+KIND/);
    expect(again).toContain("serving");
    stop.abort();
    expect(await watching).toBe(1);
  });

  it("lists every namespace without -n", async () => {
    const { rows } = await statusJson();
    const ours = rows.filter((row) => row.namespace === NAMESPACE).map((row) => `${row.kind}/${row.name}`);
    expect(ours).toEqual([
      "KnativeEventing/leaving", // fleet-system/gone
      "KnativeServing/serving", // fleet-system/spoke-1
      "KnativeEventing/eventing", // hub
    ]);
  });

  it("exits 2 naming the hub that refuses the credentials, and why", async () => {
    const kubeconfig = writeTokenKubeconfig(
      { server: sandbox.hub.server, "certificate-authority": sandbox.hub.caFile },
      "not-a-valid-token",
    );
    const { code, stdout, stderr } = await statusWith(kubeconfig);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr).toMatch(
      new RegExp(
        `^knative-fleet status: cannot list the CRs on the hub ${sandbox.hub.server}: GET \\S+: 401 Unauthorized`,
      ),
    );
  });

  it("exits 2 when the cluster does not serve the CRs, asking whether the CRDs are installed", async () => {
    const [spoke] = sandbox.spokes;
    const { code, stderr } = await statusWith(spoke!.adminKubeconfig);
    expect(code).toBe(2);
    expect(stderr).toContain(`knative-fleet status: cannot list the CRs on the hub ${spoke!.server}: `);
    expect(stderr).toContain("404 NoKindMatch");
    expect(stderr).toContain("(are the knative-fleet CRDs installed on the hub?)");
  });
});
