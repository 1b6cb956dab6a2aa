import { MANAGED_BY, MANAGED_BY_LABEL } from "../../src/api/labels.ts";
import { deleteClusterScoped } from "../../src/apply/engine.ts";
import type { KubeClient } from "../../src/kube/client.ts";
import { type ObjectRef, refKey, refOf } from "../../src/kube/object.ts";
import type { Sandbox } from "../sandbox/index.ts";
import { adminClient } from "./hub.ts";
import { waitUntil } from "./wait.ts";

/**
 * Removes the Knative installs on the spokes (their namespaces), so an install left by an earlier test (one
 * that dropped its hub CRs without cleanup) or an interrupted run does not pass for this test's.
 */
export async function cleanSpokes(sandbox: Sandbox, names: readonly string[]): Promise<void> {
  const namespaces = ["knative-serving", "knative-eventing", "kourier-system"];
  if (sandbox.spokeKind === "bare") {
    // A bare spoke has no namespace controller: a deleted namespace would stay Terminating for good.
    for (const name of names) {
      const client = adminClient(sandbox.spokes.find((s) => s.name === name)!);
      for (const ns of namespaces)
        if (await client.get("v1", "Namespace", undefined, ns))
          throw new Error(
            `${name} has namespace ${ns} from an earlier install, and a bare spoke cannot remove one: start a fresh sandbox`,
          );
    }
    return;
  }
  for (const name of names) {
    const client = adminClient(sandbox.spokes.find((s) => s.name === name)!);
    for (const ns of namespaces) await client.delete("v1", "Namespace", undefined, ns);
  }
  for (const name of names) {
    const client = adminClient(sandbox.spokes.find((s) => s.name === name)!);
    for (const ns of namespaces)
      await waitUntil(
        `${name} namespace ${ns} gone`,
        async () => ((await client.get("v1", "Namespace", undefined, ns)) ? undefined : true),
        180_000,
      );
  }
}

/** The labels every cluster-scoped object of the Serving, Kourier and Eventing releases carries. */
const RELEASE_OBJECTS = "app.kubernetes.io/name in (knative-serving,knative-eventing)";
const CLUSTER_SCOPED = [
  ["rbac.authorization.k8s.io/v1", "ClusterRole"],
  ["rbac.authorization.k8s.io/v1", "ClusterRoleBinding"],
  ["admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"],
  ["admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"],
] as const;

/**
 * Removes every trace of a Knative install from a spoke, whichever controller made it (benchmarks that
 * compare two start each run from a spoke as a fresh sandbox has it): the install namespaces, the Knative
 * CRDs and the releases' cluster-scoped objects (by the releases' own labels, and knative-fleet's), waiting
 * until they are gone.
 */
export async function clearKnative(client: KubeClient, namespaces: readonly string[]): Promise<void> {
  for (const ns of namespaces) await client.delete("v1", "Namespace", undefined, ns);
  await deleteClusterScoped(client, await releaseClusterScoped(client));
  const crds = await client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition");
  for (const crd of crds.items.filter((c) => /knative\.dev$/.test(c.metadata.name ?? "")))
    await client.delete(crd.apiVersion, crd.kind, undefined, crd.metadata.name ?? "");
  await waitUntil(
    "the spoke cleared of Knative",
    async () => {
      for (const ns of namespaces) if (await client.get("v1", "Namespace", undefined, ns)) return undefined;
      const left = await client.list("apiextensions.k8s.io/v1", "CustomResourceDefinition");
      if (left.items.some((c) => /knative\.dev$/.test(c.metadata.name ?? ""))) return undefined;
      // Deleted again while any is left: the aggregation controller can bring a husk back after a delete.
      const leftOver = await releaseClusterScoped(client);
      if (leftOver.length === 0) return true;
      await deleteClusterScoped(client, leftOver);
      return undefined;
    },
    180_000,
  );
}

/**
 * The cluster-scoped objects of the releases on a spoke, whoever applied them, and the aggregated
 * ClusterRoles' husks: deleted while the aggregation controller still held them, they come back from its
 * apply of their rules with no labels, no aggregationRule and `rules: null`, and the upstream operator fails
 * every later install on such a spoke (".rules accessor error: <nil>").
 */
async function releaseClusterScoped(client: KubeClient): Promise<ObjectRef[]> {
  const refs = new Map<string, ObjectRef>();
  for (const [apiVersion, kind] of CLUSTER_SCOPED)
    for (const labelSelector of [RELEASE_OBJECTS, `${MANAGED_BY_LABEL}=${MANAGED_BY}`])
      for (const item of (await client.list(apiVersion, kind, { labelSelector })).items)
        refs.set(refKey(refOf(item)), refOf(item));
  for (const role of (await client.list("rbac.authorization.k8s.io/v1", "ClusterRole")).items)
    if (
      role.metadata.name?.startsWith("knative-") &&
      role.metadata.labels === undefined &&
      !("aggregationRule" in role)
    )
      refs.set(refKey(refOf(role)), refOf(role));
  return [...refs.values()];
}
