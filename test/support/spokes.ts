import type { Sandbox } from "../sandbox/index.ts";
import { adminClient } from "./hub.ts";
import { waitUntil } from "./wait.ts";

/**
 * Removes the Knative installs on the spokes (their namespaces), so an install left by an earlier test (one
 * that dropped its hub CRs without cleanup) or an interrupted run does not pass for this test's.
 */
export async function cleanSpokes(sandbox: Sandbox, names: readonly string[]): Promise<void> {
  const namespaces = ["knative-serving", "knative-eventing", "kourier-system"];
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
