import { execFile, spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { homedir, tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { parse, stringify } from "yaml";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { freePort } from "../../sandbox/processes.ts";
import type { RealNode } from "../../sandbox/real-node.ts";
import { copyCheckout } from "../../support/checkout.ts";
import { type GitServer, startGitServer } from "../../support/git-server.ts";
import { adminClient, copySpokeCredentials } from "../../support/hub.ts";
import {
  CLUSTER_INVENTORY_CRDS_URL,
  clusterInventoryCrdPath,
  knativeReleasesDir,
  repoRoot,
} from "../../support/shared.ts";
import { cleanSpokes } from "../../support/spokes.ts";
import { waitUntil } from "../../support/wait.ts";
import {
  crReady,
  type FleetCr,
  fleetContainer,
  isReadyPod,
  nodeTools,
  pluginCopyValues,
  postRendererFlags,
  printPodLogsOnFailure,
  releasePods,
  removeFleet,
  sandboxHelm,
  startChartNode,
  stopChartNodes,
} from "./real-node-chart.ts";

const execFileAsync = promisify(execFile);

// The README's "## Install", from nothing to a Ready spoke, with its commands read from README.md itself: the
// release built in a clone ("From a clone": scripts/release.sh builds the npm package, the image and the chart),
// the CLI installed from that package (step 1), the CRDs (step 2), the namespaces the chart needs and that
// chart installed on the sandbox hub, whose real node (kubelet, containerd, runc) runs that image (step 3), and
// a first fleet file validated, pushed and watched until its spoke is Ready (step 4). Each command runs in bash
// as written, with only the substitutions of `sandboxSubstitutions` below, each saying why; a README that
// drifts (a command changed, added or gone) fails here. What step 4 says in prose (a ClusterProfile, the spoke's
// credentials, one committed file) is done as docs/adding-a-cluster.md does it. The image build reuses
// buildah's layer cache (real-node.test.ts builds the same Dockerfile with the same releases), so a warm run
// builds nothing.

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const { version } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as { version: string };
/** The chart's spoke credentials namespace by default, where step 4 puts the spoke's credentials. */
const CREDENTIALS_NAMESPACE = (
  parse(readFileSync(join(repoRoot, "charts", "knative-fleet", "values.yaml"), "utf8")) as {
    multicluster: { credentials: { namespace: string } };
  }
).multicluster.credentials.namespace;
const PLACEMENT_DECISION_CRD = "placementdecisions.multicluster.x-k8s.io";
/** The sandbox's ClusterProfile the first fleet file names: the last spoke, which the other release tests leave alone. */
const CLUSTER = sandbox.spokes.at(-1)!.name;
const FLEET_FILE = `clusters/${CLUSTER}/knative-serving.yaml`;
const REPO = "fleet";
const NODE = "readme-node";

// ---- the README's commands

const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
/** README.md from `from` up to the next `to`, inside the Install section. */
function part(from: string, to: string): string {
  const install = readme.slice(readme.indexOf("\n## Install\n"));
  const start = install.indexOf(from);
  const end = install.indexOf(to, start + from.length);
  if (!install.startsWith("\n## Install\n") || start < 0 || end < 0)
    throw new Error(
      `README.md's Install section has no ${JSON.stringify(from)} before ${JSON.stringify(to)}`,
    );
  return install.slice(start, end);
}
/** The commands of the part's `sh` blocks, one a line (continuation lines joined), their comments kept. */
const commands = (text: string): string[] =>
  [...text.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((m) => m[1]!.replace(/\\\n\s*/g, " ").split("\n"))
    .map((line) => line.trim())
    .filter((line) => line !== "");
const steps = {
  cli: commands(part("**1. ", "**2. ")),
  crds: commands(part("**2. ", "**3. ")),
  chart: commands(part("**3. ", "**4. ")),
  fleet: commands(part("**4. ", "\n### From a clone\n")),
  fromClone: commands(part("\n### From a clone\n", "\n## ")),
};
const find = (list: string[], pattern: RegExp, what: string): string => {
  const found = list.filter((command) => pattern.test(command));
  if (found.length !== 1) throw new Error(`README.md: expected one ${what}, found ${found.length}: ${list}`);
  return found[0]!;
};
/** "From a clone": the release built, the CLI installed from its package, its image pushed, its chart installed. */
const fromClone = {
  release: find(steps.fromClone, /^sudo scripts\/release\.sh /, "scripts/release.sh in From a clone"),
  installCli: find(steps.fromClone, /^npm install -g \S+\.tgz/, "npm install of the tarball"),
  pushImage: find(steps.fromClone, /buildah push /, "image push"),
  installChart: find(steps.fromClone, /^helm install \S+ \S+\.tgz /, "helm install of the chart file"),
};
/** The release and namespace the README installs the chart as. */
const [, RELEASE = "", NAMESPACE = ""] =
  /^helm install (\S+) \S+ .*(?:-n|--namespace) (\S+)/.exec(fromClone.installChart) ?? [];
/** The commands "From a clone" stands in for: installing the package and the chart from the registries. */
const fromRegistries = {
  installCli: find(steps.cli, /^npm install -g knative-fleet@/, "npm install from the registry"),
  installChart: find(steps.chart, /^helm install \S+ oci:\/\//, "helm install from the OCI registry"),
};

/** A README command, what ran in its place, and how it ended. */
interface Ran {
  command: string;
  ran: string;
  code: number;
  stdout: string;
  stderr: string;
}

describe("the README's Install section, from a clone to a Ready spoke", () => {
  const work = mkdtempSync(join(tmpdir(), "knative-fleet-readme-"));
  /** The clone the README's "From a clone" runs in: the checkout's files, its installed dependencies. */
  const clone = join(work, "clone");
  /** The npm prefix the CLI is installed into instead of the machine's global one. */
  const prefix = join(work, "npm-global");
  /** Where release.sh writes, kept between runs (see the substitutions). */
  const out = join(
    process.env.KNATIVE_FLEET_CACHE ?? join(homedir(), ".cache", "knative-fleet"),
    "readme-install",
    "release",
  );
  /** The user's clone of the fleet repository, where step 4 runs. */
  const fleetClone = join(work, "fleet");
  const sandboxValues = join(work, "sandbox-values.yaml");
  const cr: FleetCr = { kind: "KnativeServing", namespace: NAMESPACE, name: `${CLUSTER}-serving` };
  const figures: Record<string, number | string> = {};
  const helm = sandboxHelm(sandbox);
  /** What the hub had before the README's commands ran, so that the hub is left as found; the Secrets copied. */
  const foundBefore = { credentialsNamespace: true, placementDecisionCrd: true };
  let copiedCredentials: string[] = [];
  let git: GitServer;
  let node: Promise<RealNode>;
  let substitutions: Substitution[];

  interface Substitution {
    from: RegExp;
    to: string | ((match: string, ...groups: string[]) => string);
    why: string;
    used: number;
  }
  /**
   * What the sandbox changes in the README's commands, and only this: the test keeps to loopback (no registry,
   * no GitHub), with a real node and a Git server of its own. Applied in this order to every command.
   */
  const sandboxSubstitutions = (nodeSocket: () => string, repositoryUrl: string): Substitution[] =>
    [
      {
        from: /^sudo buildah push (\S+):(\S+)$/,
        to: (_: string, _image: string, tag: string) =>
          `ctr --address ${nodeSocket()} --namespace k8s.io images import ${join(out, "image", `knative-fleet-${tag}.oci.tar`)}`,
        why:
          "no registry listens here: the real node's containerd imports the OCI archive release.sh wrote of the " +
          "same image (as real-node.test.ts imports its own), which is what the kubelet would pull from a registry",
      },
      {
        from: /^sudo /,
        to: "",
        why:
          "this machine has no sudo: the test runs as root (buildah and the real node need it), where sudo would " +
          "run the command as it is",
      },
      {
        from: /<registry>/g,
        to: "localhost",
        why: "a loopback name, never pulled from (the image reaches the node above; the chart comes from its file)",
      },
      {
        from: /scripts\/release\.sh /,
        to: `scripts/release.sh --kodata ${knativeReleasesDir()} `,
        why:
          "the image takes the Knative releases from ../shared instead of fetching them from GitHub: the same " +
          "files (release.sh's own option) and the same build as real-node.test.ts's, so buildah's layers are reused",
      },
      {
        from: /\/tmp\/knative-fleet-release\b/g,
        to: out,
        why:
          "never the reader's own release folder; one in the cache, so that build-image.sh keeps the image " +
          "archive when the image did not change",
      },
      {
        from: /^npm install -g /,
        to: `npm install -g --prefix ${prefix} --prefer-offline `,
        why:
          "a temporary prefix instead of the machine's global one, and the dependencies from npm's cache where " +
          "it has them (the checkout's install fills it with the packages, not always with their metadata: " +
          "--offline fails on a cold cache), as npm-package.test.ts installs them",
      },
      {
        from: new RegExp(
          `${CLUSTER_INVENTORY_CRDS_URL.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/([\\w.-]+)`,
          "g",
        ),
        to: (_: string, file: string) => clusterInventoryCrdPath(file),
        why: "the same CRD files of the same release, read in place from ../shared instead of GitHub",
      },
      {
        from: /https:\/\/github\.com\/acme\/fleet\.git/g,
        to: repositoryUrl,
        why: "the fleet repository is the sandbox's own Git server (git http-backend on loopback)",
      },
      {
        from: /^(helm install .*)$/,
        to: (_: string, command: string) =>
          `${command} --values ${sandboxValues} ${postRendererFlags(sandbox).join(" ")}`,
        why:
          "the sandbox's node: the post-renderer puts the pod on the real node's host network and points it at " +
          "the hub on loopback (no pod network or Service addresses here); the values copy the credential plugins " +
          "with initContainers (containerd 1.6 has no image volumes) from the node's own images instead of " +
          "registry.k8s.io's, and move the metrics port to a free one (the host network is this machine's)",
      },
    ].map((s) => ({ ...s, used: 0 }));

  /** The command without its comment, with the sandbox's substitutions made. */
  const sandboxed = (command: string): string =>
    substitutions.reduce(
      (text, s) => {
        const next = typeof s.to === "string" ? text.replace(s.from, s.to) : text.replace(s.from, s.to);
        if (next !== text) s.used++;
        return next;
      },
      command.replace(/\s+#.*$/, ""),
    );

  /** A user's shell: the installed CLI, Node 24, the sandbox's kubectl and helm, the hub's kubeconfig. */
  const shellEnv = (): NodeJS.ProcessEnv => ({
    ...Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !/^(npm_|VITEST|NODE_ENV$)/.test(key)),
    ),
    PATH: [
      join(prefix, "bin"),
      dirname(process.execPath),
      sandbox.binDir,
      ...(process.env.PATH ?? "").split(delimiter).filter((dir) => !dir.includes("node_modules")),
    ].join(delimiter),
    KUBECONFIG: sandbox.hub.adminKubeconfig,
    GIT_AUTHOR_NAME: "Ada Operator",
    GIT_AUTHOR_EMAIL: "ada@example.com",
    GIT_COMMITTER_NAME: "Ada Operator",
    GIT_COMMITTER_EMAIL: "ada@example.com",
  });

  /** The command as sandboxed, printed with what ran in its place when that differs. */
  const announce = (command: string): string => {
    const ran = sandboxed(command);
    console.log(`$ ${command}${ran === command.replace(/\s+#.*$/, "") ? "" : `\n  ran: ${ran}`}`);
    return ran;
  };
  /** Runs a README command in bash, as sandboxed; never rejects. */
  async function run(command: string, cwd: string): Promise<Ran> {
    const ran = announce(command);
    try {
      const { stdout, stderr } = await execFileAsync("bash", ["-euo", "pipefail", "-c", ran], {
        cwd,
        env: shellEnv(),
        maxBuffer: 64 << 20,
      });
      return { command, ran, code: 0, stdout, stderr };
    } catch (err) {
      const { code, stdout, stderr } = err as { code: number; stdout: string; stderr: string };
      return { command, ran, code, stdout, stderr };
    }
  }
  /** Runs the commands in order; each must succeed. */
  async function runAll(list: readonly string[], cwd: string): Promise<Ran[]> {
    const results: Ran[] = [];
    for (const command of list) {
      const result = await run(command, cwd);
      expect(result.code, `${command}\n${result.stdout}${result.stderr}`).toBe(0);
      results.push(result);
    }
    return results;
  }
  const seconds = (since: number) => Math.round((Date.now() - since) / 1000);

  beforeAll(async () => {
    expect(RELEASE, fromClone.installChart).not.toBe("");
    await copyCheckout(clone);
    // The checkout's installed dependencies (the lock's), so that npm pack's prepack builds without installing.
    symlinkSync(join(repoRoot, "node_modules"), join(clone, "node_modules"));
    mkdirSync(out, { recursive: true });
    git = await startGitServer();
    await git.createRepo(REPO, { "README.md": "# The fleet\n" });
    await cleanSpokes(sandbox, [CLUSTER]);
    foundBefore.credentialsNamespace = !!(await hub.get("v1", "Namespace", undefined, CREDENTIALS_NAMESPACE));
    foundBefore.placementDecisionCrd = !!(await hub.get(
      "apiextensions.k8s.io/v1",
      "CustomResourceDefinition",
      undefined,
      PLACEMENT_DECISION_CRD,
    ));
    const { kubelet, images } = nodeTools(sandbox);
    writeFileSync(
      sandboxValues,
      stringify({ metrics: { port: await freePort() }, multicluster: pluginCopyValues(images) }),
    );
    // The node starts while the release builds; the image push awaits it.
    const nodeStart = Date.now();
    node = startChartNode(sandbox, hub, NODE, kubelet, images).then((started) => {
      figures.nodeReadySeconds = seconds(nodeStart);
      return started;
    });
    let socket = "";
    node.then(
      (started) => {
        socket = started.socket;
      },
      () => {}, // reported where it is awaited
    );
    substitutions = sandboxSubstitutions(() => socket, git.url(REPO));
  }, 600_000);

  afterAll(async () => {
    console.log("README install figures:", JSON.stringify(figures));
    const uninstall = () => helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait");
    if (git)
      await removeFleet(hub, [cr], {
        deleteFiles: () =>
          git.pushChange(REPO, { files: { [FLEET_FILE]: null }, message: "remove the fleet" }),
        uninstall,
      });
    await uninstall().catch(() => {});
    // The spoke as found: the finalizer leaves the install's namespace, emptied (src/install/removal.ts).
    await cleanSpokes(sandbox, [CLUSTER]);
    for (const name of copiedCredentials)
      await hub.delete("v1", "Secret", CREDENTIALS_NAMESPACE, name).catch(() => {});
    if (!foundBefore.credentialsNamespace)
      await hub.delete("v1", "Namespace", undefined, CREDENTIALS_NAMESPACE).catch(() => {});
    if (!foundBefore.placementDecisionCrd)
      await hub
        .delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", undefined, PLACEMENT_DECISION_CRD)
        .catch(() => {});
    await node?.catch(() => undefined);
    await stopChartNodes(sandbox, hub);
    await git?.close();
    rmSync(work, { recursive: true, force: true });
  }, 600_000);

  it("builds the npm package, the image and the chart with scripts/release.sh, in a clone", async () => {
    // "From a clone" is these four commands, each run below: one more would be left out.
    expect(steps.fromClone).toEqual([
      fromClone.release,
      fromClone.installCli,
      fromClone.pushImage,
      fromClone.installChart,
    ]);
    const start = Date.now();
    const [release] = await runAll([fromClone.release], clone);
    figures.releaseSeconds = seconds(start);
    console.log(
      release!.stderr
        .split("\n")
        .filter((line) => /^(release|build-image): /.test(line))
        .join("\n"),
    );
    expect(release!.stdout).toContain(`Built knative-fleet ${version} in ${out}. Not pushed`);
    for (const file of [`npm/knative-fleet-${version}.tgz`, `chart/knative-fleet-${version}.tgz`])
      expect(existsSync(join(out, file)), file).toBe(true);
    // The archive is of the image just built, tagged <registry>/knative-fleet:<version>.
    const archive = join(out, "image", `knative-fleet-${version}.oci.tar`);
    const { stdout: id } = await execFileAsync("buildah", [
      "inspect",
      "--type",
      "image",
      "--format",
      "{{.FromImageID}}",
      `localhost/knative-fleet:${version}`,
    ]);
    expect(readFileSync(`${archive}.id`, "utf8").trim()).toBe(id.trim());
    figures.imageId = id.trim().slice(0, 12);
  }, 1_200_000);

  it("installs the CLI from the release's package, and `knative-fleet -v` names the release", async () => {
    expect(steps.cli).toEqual([fromRegistries.installCli, expect.stringMatching(/^knative-fleet -v\b/)]);
    const start = Date.now();
    await runAll([fromClone.installCli], clone);
    figures.cliInstallSeconds = seconds(start);
    const [printed] = await runAll(
      steps.cli.filter((command) => command !== fromRegistries.installCli),
      work,
    );
    expect(printed!.stdout).toMatch(
      new RegExp(`^knative-fleet ${version.replaceAll(".", "\\.")} \\(Node\\.js v`),
    );
    // The one installed from the package into the prefix, not another knative-fleet on the PATH.
    const [which] = await runAll(["command -v knative-fleet"], work);
    expect(which!.stdout.trim()).toBe(join(prefix, "bin", "knative-fleet"));
  });

  it("installs the CRDs, then the release's chart, whose pod runs the release's image on the real node", async () => {
    printPodLogsOnFailure(sandbox);
    await runAll(steps.crds, work);
    for (const crd of ["clusterprofiles.multicluster.x-k8s.io", PLACEMENT_DECISION_CRD])
      expect(
        await hub.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", undefined, crd),
        crd,
      ).toBeDefined();
    // Step 3 from its chart file ("From a clone"), after what else step 3 runs (the namespaces the chart needs).
    expect(steps.chart.at(-1)).toBe(fromRegistries.installChart);
    await runAll(
      steps.chart.filter((command) => command !== fromRegistries.installChart),
      work,
    );
    const ready = await node;
    await runAll([fromClone.pushImage, fromClone.installChart], clone);
    const start = Date.now();
    const pod = await waitUntil(
      "the chart's pod Ready",
      async () => (await releasePods(hub, NAMESPACE, RELEASE)).find(isReadyPod),
      300_000,
    );
    figures.podReadySeconds = seconds(start);
    expect(pod.spec.nodeName).toBe(ready.name);
    const container = fleetContainer(pod)!;
    expect(container.image).toBe(`localhost/knative-fleet:${version}`);
    // The very image release.sh built: containerd names an image by its config digest, buildah's image id.
    const built = readFileSync(join(out, "image", `knative-fleet-${version}.oci.tar.id`), "utf8").trim();
    expect(container.imageID).toContain(built);
  }, 600_000);

  it("a first fleet: validate passes, the push reaches the spoke, and `status -w` shows it Ready", async () => {
    printPodLogsOnFailure(sandbox);
    onTestFailed(async () => {
      const live = await hub.get(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name).catch(() => undefined);
      console.error(`${cr.name} on the hub: ${JSON.stringify(live?.status ?? "absent", null, 2)}`);
    });
    // Step 4's prose: the sandbox publishes the spoke's ClusterProfile in fleet-system (its cluster manager);
    // its credentials go where the chart's plugins read them (docs/adding-a-cluster.md).
    const profile = await hub.get(
      "multicluster.x-k8s.io/v1alpha1",
      "ClusterProfile",
      sandbox.clusterProfileNamespace,
      CLUSTER,
    );
    expect(profile, `ClusterProfile ${sandbox.clusterProfileNamespace}/${CLUSTER}`).toBeDefined();
    copiedCredentials = await copySpokeCredentials(
      hub,
      { namespace: sandbox.clusterProfileNamespace, name: CLUSTER },
      CREDENTIALS_NAMESPACE,
    );
    expect(copiedCredentials).not.toEqual([]);
    // One file like fleet-example's, naming the sandbox's ClusterProfile, committed in a clone of the repository.
    const example = readFileSync(
      join(repoRoot, "fleet-example", "clusters", "spoke-1", "knative-serving.yaml"),
      "utf8",
    );
    const file = example.replaceAll("spoke-1", CLUSTER);
    expect(parse(file)).toMatchObject({
      metadata: { name: cr.name, namespace: NAMESPACE },
      spec: { clusterProfileRef: { name: CLUSTER, namespace: sandbox.clusterProfileNamespace } },
    });
    await runAll([`git clone --quiet ${git.url(REPO)} ${fleetClone}`], work);
    mkdirSync(join(fleetClone, dirname(FLEET_FILE)), { recursive: true });
    writeFileSync(join(fleetClone, FLEET_FILE), file);
    await runAll(
      [`git add ${FLEET_FILE}`, `git commit --quiet -m "${CLUSTER}: Knative Serving"`],
      fleetClone,
    );

    // The block, in order: validate, push, then `status -w` until the spoke is Ready.
    const watch = find(steps.fleet, /^knative-fleet status -w\b/, "status -w");
    expect(steps.fleet.at(-1)).toBe(watch);
    let pushedAt = 0;
    for (const command of steps.fleet.slice(0, -1)) {
      let result = await run(command, fleetClone);
      if (
        /^git push\b/.test(command) &&
        result.code !== 0 &&
        /\[rejected\]|fetch first/.test(result.stderr)
      ) {
        // As a person does when the bot's status commit (of the empty fleet) landed first: rebase, push again.
        console.log(`git push was rejected:\n${result.stderr}`);
        await runAll(["git pull --quiet --rebase"], fleetClone);
        result = await run(command, fleetClone);
      }
      expect(result.code, `${command}\n${result.stdout}${result.stderr}`).toBe(0);
      if (/^knative-fleet validate\b/.test(command))
        expect(result.stdout).toMatch(/^1 files?, 1 resources?, 0 errors$/m);
      if (/^git push\b/.test(command)) pushedAt = Date.now();
    }
    expect(pushedAt).toBeGreaterThan(0);

    const row = new RegExp(
      `^${sandbox.clusterProfileNamespace}/${CLUSTER}\\s+KnativeServing\\s+${NAMESPACE}/${cr.name}\\s+True\\s+\\S+\\s+Current$`,
      "m",
    );
    const watched = await watchUntil(watch, fleetClone, (printed) => row.test(printed), 600_000);
    figures.pushToReadySeconds = seconds(pushedAt);
    console.log(`status -w, its last listing:\n${watched.last}`);
    expect(watched.last).toMatch(row);
    // Ctrl-C ends the watch with the exit code of its last listing (0: every CR Current; 1: another is not).
    expect([0, 1], watched.stderr).toContain(watched.code);

    expect(await crReady(hub, cr)).toBe(true);
    const live = await hub.get(OPERATOR_API_VERSION, cr.kind, cr.namespace, cr.name);
    expect(live?.metadata.annotations?.["fleet.knative.dev/source-path"]).toBe(FLEET_FILE);
    const spoke = adminClient(sandbox.spokes.find((s) => s.name === CLUSTER)!);
    expect(await spoke.get("apps/v1", "Deployment", "knative-serving", "controller")).toBeDefined();
  }, 900_000);

  it("needed each of the sandbox's substitutions: one that no README command matches any more fails", () => {
    expect(substitutions.filter((s) => s.used === 0).map((s) => `${s.from}: ${s.why}`)).toEqual([]);
  });

  /**
   * Runs a watching README command (`status -w`) until what it printed satisfies `done`, then interrupts it as a
   * person does (Ctrl-C: SIGINT to its process group). What it printed last (the text after its last blank line
   * separator) and its exit code.
   */
  async function watchUntil(
    command: string,
    cwd: string,
    done: (printed: string) => boolean,
    timeoutMs: number,
  ): Promise<{ last: string; code: number | null; stderr: string }> {
    const ran = announce(command);
    const child = spawn("bash", ["-c", ran], { cwd, env: shellEnv(), detached: true });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    // Until done, the watch ended by itself, or the time is up: the caller's assertions say which.
    await waitUntil(
      `${command} to show ${cr.name} Ready`,
      async () => (done(stdout) || child.exitCode !== null ? true : undefined),
      timeoutMs,
    ).catch(() => {});
    if (child.exitCode === null) process.kill(-child.pid!, "SIGINT");
    const code = await exited;
    const listings = stdout.split(/\n\n(?=CLUSTER\s)/);
    return { last: listings.at(-1) ?? "", code, stderr };
  }
});
