import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "../../support/shared.ts";

// The README's install section is what a new user follows word for word: the CLI, the CRDs, the chart, a
// first fleet, in that order and before the developer sandbox, each command naming the release the
// repository is at (package.json's version) and the Cluster Inventory API release the sandbox tests with.

const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
const { version } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string };
/** The section between `## Install` and the next `## ` heading. */
const install = (() => {
  const start = readme.indexOf("\n## Install\n");
  expect(start).toBeGreaterThan(0);
  const end = readme.indexOf("\n## ", start + 1);
  return readme.slice(start, end);
})();
/** The commands of the section's shell blocks, continuation lines joined. */
const commands = [...install.matchAll(/```sh\n([\s\S]*?)```/g)]
  .flatMap((m) => m[1]!.replace(/\\\n\s*/g, " ").split("\n"))
  .map((line) => line.replace(/\s+#.*$/, "").trim())
  .filter((line) => line !== "");

describe("the README's install section", () => {
  it("comes before the developer sandbox", () => {
    expect(readme.indexOf("\n## Install\n")).toBeLessThan(
      readme.indexOf("\n## Quick start: the developer sandbox\n"),
    );
    expect(readme.indexOf("npm run demo")).toBeGreaterThan(
      readme.indexOf("\n## Quick start: the developer sandbox\n"),
    );
  });

  it("installs the CLI, the CRDs, the chart, then a first fleet, in that order", () => {
    const at = (pattern: RegExp) => commands.findIndex((c) => pattern.test(c));
    const order = [
      at(/^npm install -g knative-fleet@/),
      at(/^kubectl apply .*clusterprofiles\.yaml$/),
      at(/^helm install knative-fleet oci:\/\//),
      at(/^knative-fleet validate /),
      at(/^knative-fleet status /),
    ];
    expect(
      order.every((i) => i >= 0),
      commands.join("\n"),
    ).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it("names package.json's version for the package and the chart", () => {
    expect(commands).toContain(`npm install -g knative-fleet@${version}`);
    const helm = commands.find((c) => c.startsWith("helm install knative-fleet oci://"))!;
    expect(helm).toContain("oci://ghcr.io/knative-fleet/charts/knative-fleet");
    expect(helm).toContain(`--version ${version}`);
    expect(helm).toContain("--create-namespace");
    for (const local of commands.filter((c) => c.includes("/tmp/knative-fleet-release/")))
      expect(local).toContain(`knative-fleet-${version}.tgz`);
  });

  it("installs the ClusterProfile and PlacementDecision CRDs of the Cluster Inventory API release the sandbox tests with", () => {
    const pinned = /^CLUSTER_INVENTORY_API_VERSION=(v[\d.]+)$/m.exec(
      readFileSync(join(repoRoot, "test", "sandbox", "build-tools.sh"), "utf8"),
    )?.[1];
    expect(pinned).toBeDefined();
    const base = `https://raw.githubusercontent.com/kubernetes-sigs/cluster-inventory-api/${pinned}/config/crd/bases`;
    for (const crd of ["clusterprofiles", "placementdecisions"])
      expect(commands).toContain(`kubectl apply --server-side -f ${base}/multicluster.x-k8s.io_${crd}.yaml`);
  });
});
