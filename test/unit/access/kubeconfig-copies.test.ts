import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chmod, readFile, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { AccessError } from "../../../src/access/errors.ts";
import { type ExecPlugin, runExecPlugin } from "../../../src/access/exec-plugin.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { scratchDir } from "./support.ts";

// Issue #43: the copies of the plugin's kubeconfig that point it at a credentials namespace (they name the
// hub user's key files, or hold its keys) piled up in TMPDIR, and a plugin's error did not say which
// Secret the binding had made it read.

const scratch = scratchDir();
const pluginKubeconfig = join(scratch, "plugin-kubeconfig");
const runLog = join(scratch, "runs");

/**
 * A plugin that records the kubeconfig it was given, fails (as a Secret reader does, naming the Secret by
 * name only) when FAIL is set or when the copy does not point at the bound namespace, and otherwise
 * returns a token.
 */
const readerPlugin = join(scratch, "reader.sh");
/** A plugin that answers with the NAMESPACE it was run with as its token (as cp-creds would read there). */
const namespacePlugin = join(scratch, "namespace.sh");

const ready = (async () => {
  await writeFile(
    pluginKubeconfig,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "hub", cluster: { server: "https://hub.invalid:6443" } }],
      users: [{ name: "fleet", user: { "client-key": "fleet.key", "client-certificate": "fleet.crt" } }],
      contexts: [{ name: "hub", context: { cluster: "hub", user: "fleet", namespace: "shared" } }],
      "current-context": "hub",
    }),
  );
  await writeFile(
    readerPlugin,
    `#!/bin/sh
echo "$KUBECONFIG" >>"${runLog}"
grep -q "namespace: creds-a" "$KUBECONFIG" || { echo "Error: not pointed at creds-a" >&2; exit 4; }
sleep 0.2
if [ -n "\${FAIL:-}" ]; then echo 'Error: secrets "spoke-1" not found' >&2; exit 3; fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t"}}\\n'
`,
  );
  await chmod(readerPlugin, 0o755);
  await writeFile(
    namespacePlugin,
    `#!/bin/sh
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\\n' "\${NAMESPACE:-unset}"
`,
  );
  await chmod(namespacePlugin, 0o755);
})();

function boundPlugin(env: Record<string, string> = {}): ExecPlugin {
  return {
    providerName: "secretreader",
    apiVersion: "client.authentication.k8s.io/v1",
    command: readerPlugin,
    args: [],
    env: [
      { name: "KUBECONFIG", value: pluginKubeconfig },
      ...Object.entries(env).map(([name, value]) => ({ name, value })),
    ],
    provideClusterInfo: true,
    installHint: undefined,
    credentialsNamespace: "creds-a",
  };
}

const cluster = (config: Record<string, string>) => ({ server: "https://spoke.invalid:6443", config });

const runs = async () => (await readFile(runLog, "utf8")).split("\n").filter((line) => line !== "");

describe("the plugin's kubeconfig copy", () => {
  it("lives only as long as the plugin run that reads it, failed or not, however many run at once", async () => {
    await ready;
    const options = { timeoutMs: 5_000, logger: silentLogger };
    const outcomes = await Promise.allSettled([
      ...Array.from({ length: 4 }, () =>
        runExecPlugin(boundPlugin(), cluster({ clusterName: "spoke-1" }), options),
      ),
      runExecPlugin(boundPlugin({ FAIL: "1" }), cluster({ clusterName: "spoke-1" }), options),
    ]);
    expect(outcomes.map((outcome) => outcome.status)).toEqual([
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "fulfilled",
      "rejected",
    ]);
    const copies = await runs();
    expect(new Set(copies).size).toBe(5); // a copy per run: none removes another's while it is read
    for (const copy of copies) expect(existsSync(copy)).toBe(false);
    expect(readdirSync(dirname(copies[0]!))).toEqual([]);
  });

  it("goes with its folder when the process exits, even while a plugin still reads it", async () => {
    await ready;
    const module = join(import.meta.dirname, "../../../src/access/credential-binding.ts");
    const script = `
      import { withKubeconfigInNamespace } from ${JSON.stringify(module)};
      await withKubeconfigInNamespace(process.argv[1], "creds-a", async (copy) => {
        console.log(copy);
        process.exit(0);
      });
    `;
    const { stdout } = await promisify(execFile)(process.execPath, [
      "--input-type=module",
      "-e",
      script,
      pluginKubeconfig,
    ]);
    const copy = stdout.trim();
    expect(copy).toMatch(/knative-fleet-plugin-kubeconfigs-[^/]+\/[^/]+\.yaml$/);
    expect(existsSync(dirname(copy))).toBe(false);
  });
});

describe("a bound plugin's failure", () => {
  it("sets NAMESPACE to where the binding reads, as OCM's cp-creds reads $NAMESPACE before its kubeconfig", async () => {
    await ready;
    const namespaceOf = async (plugin: ExecPlugin) => {
      const credential = await runExecPlugin(plugin, cluster({}), { timeoutMs: 5_000, logger: silentLogger });
      return credential.token;
    };
    // Bound: the credentials namespace of the ClusterProfile's namespace, whatever the Pod's namespace is.
    expect(await namespaceOf({ ...boundPlugin(), command: namespacePlugin })).toBe("creds-a");
    // Not bound: its kubeconfig's namespace, not the ServiceAccount namespace file cp-creds falls back to.
    expect(
      await namespaceOf({ ...boundPlugin(), command: namespacePlugin, credentialsNamespace: undefined }),
    ).toBe("shared");
    // The same namespace set in the provider file is no conflict; a plugin with no kubeconfig gets none.
    expect(await namespaceOf({ ...boundPlugin({ NAMESPACE: "creds-a" }), command: namespacePlugin })).toBe(
      "creds-a",
    );
    expect(
      await namespaceOf({
        ...boundPlugin(),
        command: namespacePlugin,
        env: [],
        credentialsNamespace: undefined,
      }),
    ).toBe("unset");
    // A provider file that points NAMESPACE elsewhere would undo the binding: refused, saying why.
    await expect(
      namespaceOf({ ...boundPlugin({ NAMESPACE: "knative-fleet" }), command: namespacePlugin }),
    ).rejects.toThrow(/NAMESPACE="knative-fleet" in execConfig.env, but its credentials are read in creds-a/);
  });

  it("names the Secret the binding made it read: namespace and name, never its content", async () => {
    await ready;
    const failure = (config: Record<string, string>) =>
      runExecPlugin(boundPlugin({ FAIL: "1" }), cluster(config), {
        timeoutMs: 5_000,
        logger: silentLogger,
      }).then(
        () => expect.unreachable("the plugin failed"),
        (err: unknown) => {
          expect(err).toBeInstanceOf(AccessError);
          return (err as AccessError).message;
        },
      );
    expect(await failure({ name: "spoke-1-kubeconfig" })).toBe(
      `access provider "secretreader": plugin ${readerPlugin} exited with code 3: Error: secrets "spoke-1" ` +
        "not found; it reads Secret creds-a/spoke-1-kubeconfig (namespace from access.credentialNamespaces, " +
        "name from the exec extension)",
    );
    expect(await failure({ clusterName: "spoke-1" })).toMatch(
      /exited with code 3: .*; it reads the Secret of cluster "spoke-1" in namespace creds-a \(access\.credentialNamespaces\)$/,
    );
  });
});
