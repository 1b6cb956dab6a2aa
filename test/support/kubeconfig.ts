import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Writes a one-cluster kubeconfig with a bearer token to a fresh temp dir; returns its path. */
export function writeTokenKubeconfig(cluster: Record<string, unknown>, token: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "knative-fleet-kubeconfig-")), "config");
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "hub", cluster }],
      users: [{ name: "user", user: { token } }],
      contexts: [{ name: "hub", context: { cluster: "hub", user: "user" } }],
      "current-context": "hub",
    }),
  );
  return path;
}
