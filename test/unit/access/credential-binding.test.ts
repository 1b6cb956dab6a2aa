import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import {
  boundCredentialsNamespace,
  kubeconfigInNamespace,
  kubeconfigNamespace,
} from "../../../src/access/credential-binding.ts";
import { SAFE_ACCESS_POLICY } from "../../../src/access/policy.ts";

// The binding's own cases that spoke-endpoint.test.ts does not reach (found by mutation testing, issue #37).

const FIELD = "status.accessProviders[0].cluster";
const ref = { namespace: "gke-clusters", name: "cluster1" };
const bind = (config: object, namespaces: readonly string[] | undefined) =>
  boundCredentialsNamespace(config, ref, FIELD, SAFE_ACCESS_POLICY, namespaces);
const ambiguity = (readFrom: string) =>
  `ClusterProfiles are read from ${readFrom}, so a credential named after ClusterProfile gke-clusters/cluster1 ` +
  "could be another namespace's cluster1: give namespace gke-clusters a credentials namespace of its own in " +
  "access.credentialNamespaces (chart: multicluster.access.credentialNamespaces)";

describe("boundCredentialsNamespace", () => {
  it("one ClusterProfile namespace read, but not this ClusterProfile's: a name is not unique to it", () => {
    expect(() => bind({ clusterName: "cluster1" }, ["ocm-clusters"])).toThrow(ambiguity("ocm-clusters"));
    expect(bind({ clusterName: "cluster1" }, ["gke-clusters"])).toBeUndefined();
  });

  it("a plugin config naming its credential by name or by namespace alone names one too", () => {
    const two = ["ocm-clusters", "gke-clusters"];
    expect(() => bind({ name: "cluster1-kubeconfig" }, two)).toThrow(ambiguity("ocm-clusters, gke-clusters"));
    expect(() => bind({ namespace: "ocm-credentials" }, two)).toThrow(
      ambiguity("ocm-clusters, gke-clusters"),
    );
    expect(() => bind({ clusterName: "cluster1" }, undefined)).toThrow(ambiguity("every namespace"));
    expect(bind(null as unknown as object, two)).toBeUndefined(); // no config: a cloud plugin's own
  });
});

describe("the plugin's kubeconfig", () => {
  async function kubeconfig(content: object): Promise<{ dir: string; path: string }> {
    const dir = await mkdtemp(join(tmpdir(), "knative-fleet-binding-"));
    const path = join(dir, "kubeconfig");
    await writeFile(path, stringify(content));
    return { dir, path };
  }

  it("its namespace is its current context's, not its first context's", async () => {
    const { path } = await kubeconfig({
      contexts: [
        { name: "other", context: { namespace: "other-credentials" } },
        { name: "creds", context: { namespace: "shared-credentials" } },
      ],
      "current-context": "creds",
    });
    expect(await kubeconfigNamespace(path)).toBe("shared-credentials");
    const copy = parse(await readFile(await kubeconfigInNamespace(path, "gke-credentials"), "utf8"));
    expect(copy.contexts).toEqual([
      { name: "other", context: { namespace: "other-credentials" } },
      { name: "creds", context: { namespace: "gke-credentials" } },
    ]);
  });

  it("a copy resolves the user's relative files against the original's folder, and leaves empty ones empty", async () => {
    const { dir, path } = await kubeconfig({
      clusters: [{ name: "hub", cluster: { "certificate-authority": "" } }],
      users: [
        {
          name: "fleet",
          user: { "client-certificate": "tls.crt", "client-key": "tls.key", tokenFile: "token" },
        },
      ],
      contexts: [{ name: "creds", context: { cluster: "hub", user: "fleet" } }],
      "current-context": "creds",
    });
    const copy = parse(await readFile(await kubeconfigInNamespace(path, "gke-credentials"), "utf8"));
    expect(copy.users[0].user).toEqual({
      "client-certificate": join(dir, "tls.crt"),
      "client-key": join(dir, "tls.key"),
      tokenFile: join(dir, "token"),
    });
    expect(copy.clusters[0].cluster).toEqual({ "certificate-authority": "" });
  });

  it("one without a current context cannot be pointed at the credentials namespace", async () => {
    const { path } = await kubeconfig({ contexts: [{ name: "creds", context: {} }] });
    await expect(kubeconfigInNamespace(path, "gke-credentials")).rejects.toThrow(
      `the plugin's kubeconfig ${path} has no current context, so it cannot be pointed at the credentials namespace gke-credentials`,
    );
  });
});
