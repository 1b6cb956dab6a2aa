import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { loadProviderConfig } from "../../../src/access/provider-config.ts";
import { OPERATOR_API_VERSION } from "../../../src/api/knative.ts";
import {
  CONFIRM_PRUNE_ANNOTATION,
  PRUNE_CONFIRMATION_CONFIGMAP,
  ROLLOUT_PAUSED_ANNOTATION,
} from "../../../src/api/labels.ts";
import { commands } from "../../../src/commands/main.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { EventRecorder } from "../../../src/observability/events.ts";
import { silentLogger } from "../../../src/observability/log.ts";
import { ROLLOUT_STATE_CONFIGMAP } from "../../../src/rollout/state.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { ensureTools, toolPath } from "../../sandbox/tools.ts";
import { renderChart } from "../../support/helm.ts";
import { adminClient, ensureNamespace, installFleetCrds } from "../../support/hub.ts";
import { repoRoot } from "../../support/shared.ts";

const execFileAsync = promisify(execFile);

// The guides in docs/, run as a reader would run them: every ```sh block, in order, by bash with
// `set -euo pipefail`, with the real kubectl, helm and knative-fleet (the sources), against the sandbox hub and
// a sandbox spoke. A block is marked in the Markdown when it is not run as it stands:
//   <!-- doc-test: env -->                 variables the reader sets; the test sets the same names
//   <!-- doc-test: not run: <why> -->      needs what the sandbox lacks (a pod's containers, a cloud); only
//                                          checked: bash parses it, and its knative-fleet flags exist
//   <!-- doc-test: apply --dry-run=server --> (yaml) the hub's API server accepts the object
//   <!-- doc-test: chart values -->        (yaml) the chart renders with it, and a valid provider file
// Each knative-fleet call's exit code is recorded, so a guide's expectations are checked (docs/cli.md).

const sandbox = loadSandbox();
const hub = adminClient(sandbox.hub);
const GUIDES = [
  "adding-a-cluster.md",
  "troubleshooting.md",
  "upgrading.md",
  "prune-confirmation.md",
  "rollback.md",
];
const suffix = randomBytes(3).toString("hex");

interface Block {
  /** The heading of the section it is in. */
  section: string;
  language: string;
  marker: string | undefined;
  text: string;
  line: number;
}

function blocksOf(guide: string): Block[] {
  const text = readFileSync(join(repoRoot, "docs", guide), "utf8");
  const blocks: Block[] = [];
  let section = "";
  let marker: string | undefined;
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith("#")) section = line.replace(/^#+\s*/, "");
    const mark = /^<!-- doc-test: (.+) -->$/.exec(line);
    if (mark) {
      marker = mark[1];
      continue;
    }
    const fence = /^```(\w+)$/.exec(line);
    if (!fence) continue;
    const end = lines.indexOf("```", i + 1);
    blocks.push({
      section,
      language: fence[1]!,
      marker,
      text: lines.slice(i + 1, end).join("\n"),
      line: i + 1,
    });
    marker = undefined;
    i = end;
  }
  return blocks;
}

/** The variables an env block exports. */
const exported = (block: Block) => [...block.text.matchAll(/^export (\w+)=/gm)].map((m) => m[1]!);

let work: string;
let bin: string;
let calls: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), "knative-fleet-guides-"));
  bin = join(work, "bin");
  calls = join(work, "knative-fleet-calls");
  const tools = ensureTools("kubectl");
  await execFileAsync("mkdir", ["-p", bin]);
  const shim = (name: string, body: string) => {
    writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  // knative-fleet from the sources, its exit code logged with its arguments (exit 1 is a finding, not a
  // failure: it does not stop the block, and each guide says which calls find what).
  shim(
    "knative-fleet",
    `"${process.execPath}" "${join(repoRoot, "src", "cli.ts")}" "$@"; code=$?\necho "$code $*" >> "${calls}"\n[ "$code" -le 1 ]`,
  );
  shim("kubectl", `exec "${toolPath(tools, "kubectl")}" "$@"`);
  shim("helm", `exec "${toolPath(tools, "helm")}" "$@"`);
  await installFleetCrds(hub);
  await ensureNamespace(hub, "knative-fleet-spoke-credentials");
}, 600_000);
afterAll(async () => {
  await execFileAsync("rm", ["-rf", work]);
  // The namespaces the guides' runs made on the shared hub, and what is in them.
  for (const guide of ["trouble", "upgrade", "prune", "rollback"])
    await hub.delete("v1", "Namespace", undefined, `doc-${guide}-${suffix}`).catch(() => {});
});

/** Runs one block in bash; its output, or an error naming the guide and line. */
async function runBlock(
  guide: string,
  block: Block,
  env: Record<string, string>,
  cwd: string,
): Promise<string> {
  const script = `set -euo pipefail\n${block.text}\n`;
  try {
    const { stdout, stderr } = await execFileAsync("bash", ["-c", script], {
      cwd,
      env: {
        PATH: [bin, ...(process.env.PATH ?? "").split(delimiter)].join(delimiter),
        HOME: work,
        KUBECONFIG: sandbox.hub.adminKubeconfig,
        ...env,
      },
      maxBuffer: 16 << 20,
      timeout: 300_000,
    });
    return stdout + stderr;
  } catch (err) {
    const { stdout, stderr } = err as { stdout: string; stderr: string };
    throw new Error(`docs/${guide}:${block.line} failed:\n${block.text}\n--- output:\n${stdout}${stderr}`);
  }
}

/** The knative-fleet calls made since `from` (a count of earlier lines): "code args". */
function callsSince(from: number): string[] {
  const lines = (() => {
    try {
      return readFileSync(calls, "utf8").trim().split("\n");
    } catch {
      return [];
    }
  })();
  return lines.slice(from);
}

/**
 * Runs a guide: checks its markers and blocks, runs each runnable sh block in order (`before[heading]` runs
 * first when a section of that heading starts), and returns what they printed.
 */
async function runGuide(
  guide: string,
  env: Record<string, string>,
  options: { cwd?: string; before?: Record<string, () => Promise<void>> } = {},
): Promise<string> {
  const blocks = blocksOf(guide);
  const cwd = options.cwd ?? mkdtempSync(join(work, "guide-"));
  const envNames = blocks.filter((b) => b.marker === "env").flatMap(exported);
  expect(envNames.sort(), `docs/${guide}: the variables its env blocks set`).toEqual(Object.keys(env).sort());
  let output = "";
  let section: string | undefined;
  for (const block of blocks) {
    if (block.section !== section) {
      section = block.section;
      await options.before?.[section]?.();
    }
    const where = `docs/${guide}:${block.line}`;
    if (block.language === "sh" && block.marker === undefined) {
      output += await runBlock(guide, block, env, cwd);
    } else if (block.language === "sh" && block.marker === "env") {
      // Set by the test instead.
    } else if (block.language === "sh") {
      expect(block.marker, where).toMatch(/^not run: \S.{10,}/);
      await execFileAsync("bash", ["-n", "-c", block.text]).catch((err) => {
        throw new Error(`${where}: bash cannot parse it: ${(err as { stderr: string }).stderr}`);
      });
      checkCliFlags(where, block.text);
    } else if (block.marker === "apply --dry-run=server") {
      await execFileAsync(toolPath(ensureTools("kubectl"), "kubectl"), [
        "--kubeconfig",
        sandbox.hub.adminKubeconfig,
        "apply",
        "--dry-run=server",
        "-f",
        writeTemp(block.text),
      ]).catch((err) => {
        throw new Error(`${where}: the hub refuses it: ${(err as { stderr: string }).stderr}`);
      });
    } else if (block.marker === "chart values") {
      await checkChartValues(where, parse(block.text) as object);
    } else {
      expect(block.marker, `${where}: an unknown doc-test marker`).toBeUndefined();
    }
  }
  return output;
}

const writeTemp = (text: string): string => {
  const file = join(mkdtempSync(join(work, "block-")), "block.yaml");
  writeFileSync(file, text);
  return file;
};

/** Every `knative-fleet <command> --flag` a block runs (a command of its own, or after `exec ... --`) exists. */
function checkCliFlags(where: string, text: string): void {
  for (const call of text.matchAll(
    /(?:^\s*|[;|&(]\s*|-- )knative-fleet ([a-z][\w-]*)((?: (?:\\\n)?\s*-[-\w]+(?: \S+)?)*)/gm,
  )) {
    const command = commands.find((c) => c.name === call[1]);
    expect(command, `${where}: knative-fleet ${call[1]}`).toBeDefined();
    for (const flag of call[2]!.matchAll(/ -(-?)([\w-]+)/g)) {
      const known = Object.entries(command!.options).some(([long, option]) =>
        flag[1] === "-" ? long === flag[2] : option.short === flag[2],
      );
      expect(known, `${where}: knative-fleet ${call[1]} -${flag[1]}${flag[2]}`).toBe(true);
    }
  }
}

/** The chart renders with the values, and its provider file is one the service loads. */
async function checkChartValues(where: string, values: object): Promise<void> {
  const objects = renderChart({ values, release: "doc" });
  const providerMap = objects.find(
    (o) => o.kind === "ConfigMap" && o.metadata.name?.endsWith("provider-file"),
  ) as (KubeObject & { data: Record<string, string> }) | undefined;
  expect(providerMap, `${where}: the chart renders a provider file`).toBeDefined();
  const state = await loadProviderConfig(writeTemp(providerMap!.data["config.json"]!));
  expect(JSON.stringify(state), where).toContain("open-cluster-management");
}

describe("the guides in docs/", () => {
  it("are linked from the README", () => {
    const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
    for (const guide of GUIDES) expect(readme).toContain(`(docs/${guide})`);
  });

  it("adding-a-cluster.md: a plain kubeconfig Secret makes a reachable cluster a fleet file can name", async () => {
    const cluster = `doc-edge-${suffix}`;
    const from = callsSince(0).length;
    // The plugins the chart mounts read the credentials namespace through a kubeconfig whose context names it;
    // the sandbox's own plugin kubeconfig names fleet-system, where the sandbox keeps its spokes' Secrets.
    const pluginKubeconfig = parse(readFileSync(sandbox.pluginKubeconfig, "utf8")) as {
      contexts: { context: { namespace?: string } }[];
    };
    for (const context of pluginKubeconfig.contexts)
      context.context.namespace = "knative-fleet-spoke-credentials";
    const pluginFile = writeTemp(stringify(pluginKubeconfig));
    const providers = JSON.parse(readFileSync(sandbox.providerFile, "utf8")) as {
      providers: { name: string; execConfig: { env?: { name: string; value: string }[] } }[];
    };
    for (const provider of providers.providers)
      provider.execConfig.env = [{ name: "KUBECONFIG", value: pluginFile }];
    const providerFile = writeTemp(JSON.stringify(providers));
    let reachable = "";
    const output = await runGuide(
      "adding-a-cluster.md",
      { NS: `doc-fleet-${suffix}`, CLUSTER: cluster, SPOKE_KUBECONFIG: sandbox.spokes[0]!.adminKubeconfig },
      {
        before: {
          // The guide's check runs in the pod; the same check with the sandbox's plugins, before removal.
          "Removing a cluster": async () => {
            const { stdout } = await execFileAsync(
              join(bin, "knative-fleet"),
              ["clusters", "--clusterprofile-provider-file", providerFile, "-n", "fleet-system", cluster],
              { env: { ...process.env, KUBECONFIG: sandbox.hub.adminKubeconfig } },
            );
            reachable = stdout;
          },
        },
      },
    );
    expect(reachable).toMatch(
      new RegExp(`^fleet-system\\s+${cluster}\\s+True\\s+kubeconfig-secretreader\\s+v1\\.`, "m"),
    );
    expect(reachable).toContain("Reachable");
    expect(output).toMatch(/1 file, 1 resource, 0 errors/);
    expect(callsSince(from).map((line) => line.split(" ")[0])).toEqual(["0", "0"]); // validate, clusters
    // Removing the cluster removed what adding it created.
    expect(
      await hub.get("multicluster.x-k8s.io/v1alpha1", "ClusterProfile", "fleet-system", cluster),
    ).toBeUndefined();
    expect(
      await hub.get("v1", "Secret", "knative-fleet-spoke-credentials", `${cluster}-kubeconfig`),
    ).toBeUndefined();
  });

  it("troubleshooting.md: status, conditions and Events name why a CR is not Ready", async () => {
    const ns = `doc-trouble-${suffix}`;
    const cr = "edge-9-serving";
    await ensureNamespace(hub, ns);
    const object: KubeObject = {
      apiVersion: OPERATOR_API_VERSION,
      kind: "KnativeServing",
      metadata: { name: cr, namespace: ns },
      spec: { version: "1.22", clusterProfileRef: { name: "edge-9", namespace: "fleet-system" } },
    };
    await hub.apply(object);
    const message = "ClusterProfile fleet-system/edge-9 not found";
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const condition = (type: string, status: string, reason?: string) => ({
      type,
      status,
      ...(reason ? { reason, message } : {}),
      lastTransitionTime: now,
    });
    await hub.apply(
      {
        ...object,
        spec: undefined,
        status: {
          observedGeneration: 1,
          conditions: [
            condition("DependenciesInstalled", "Unknown"),
            condition("Ready", "False", "ClusterProfileNotFound"),
            condition("TargetClusterResolved", "False", "ClusterProfileNotFound"),
          ],
        },
      } as KubeObject,
      { subresource: "status" },
    );
    const live = await hub.get(OPERATOR_API_VERSION, "KnativeServing", ns, cr);
    // The Event the reconciler records, through its own recorder.
    await new EventRecorder({ client: hub, component: "knative-fleet", log: silentLogger }).record(
      {
        apiVersion: OPERATOR_API_VERSION,
        kind: "KnativeServing",
        metadata: { name: cr, namespace: ns, uid: live!.metadata.uid as string },
      },
      "Warning",
      "ClusterProfileNotFound",
      message,
    );
    const from = callsSince(0).length;
    const output = await runGuide("troubleshooting.md", {
      NS: ns,
      CR: cr,
      SPOKE_KUBECONFIG: sandbox.spokes[0]!.adminKubeconfig,
    });
    // status (twice: -o wide) finds the CR not Ready: exit 1, with the reason and message.
    expect(callsSince(from).map((line) => line.split(" ")[0])).toEqual(["1", "1"]);
    expect(output).toContain(`ClusterProfileNotFound: ${message}`);
    expect(output).toMatch(/GENERATION\s+SOURCE/);
    expect(output).toContain(`TargetClusterResolved\tFalse\tClusterProfileNotFound\t${message}`);
    expect(output).toMatch(
      new RegExp(`Warning\\s+ClusterProfileNotFound\\s+knativeserving/${cr}\\s+${message}`),
    );
  });

  it("upgrading.md: CRDs, helm upgrade and rollout on an installed release; the uninstall that cleans up", async () => {
    const ns = `doc-upgrade-${suffix}`;
    const release = `doc-kf-${suffix}`;
    const { version } = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
      version: string;
    };
    const image = "registry.example.com/knative-fleet";
    await ensureNamespace(hub, ns);
    // Installed as the chart README says (its pods run on the sandbox's kwok nodes).
    await execFileAsync(
      join(bin, "helm"),
      [
        "install",
        release,
        join(repoRoot, "charts", "knative-fleet"),
        "-n",
        ns,
        "--kubeconfig",
        sandbox.hub.adminKubeconfig,
        "--set",
        "fleet.repository.url=https://git.example.com/fleet.git",
        "--set",
        `image.repository=${image}`,
        "--set",
        "image.tag=0.0.9",
        "--set",
        `fullnameOverride=${release}`,
      ],
      { maxBuffer: 16 << 20 },
    );
    const output = await runGuide(
      "upgrading.md",
      { NS: ns, RELEASE: release, IMAGE: image, VERSION: version },
      { cwd: repoRoot },
    );
    expect(output).toContain(`${image}:0.0.9`); // what ran before
    expect(output).toContain(`deployment "${release}" successfully rolled out`);
    expect(output).toContain(`release "${release}" uninstalled`);
    expect(await hub.get("apps/v1", "Deployment", ns, release)).toBeUndefined();
  });

  it("prune-confirmation.md: the commands annotate the ConfigMap the mirror reads", async () => {
    const ns = `doc-prune-${suffix}`;
    await ensureNamespace(hub, ns);
    const token = "0f3a9c61b2d4e8f7";
    await runGuide("prune-confirmation.md", { NS: ns, TOKEN: token });
    const configMap = await hub.get("v1", "ConfigMap", ns, PRUNE_CONFIRMATION_CONFIGMAP);
    expect(configMap?.metadata.annotations?.[CONFIRM_PRUNE_ANNOTATION]).toBe(token);
    // Run again, as a reader confirming a second prune would: the same commands work on the existing ConfigMap.
    await runGuide("prune-confirmation.md", { NS: ns, TOKEN: "a1b2c3" });
    expect(
      (await hub.get("v1", "ConfigMap", ns, PRUNE_CONFIRMATION_CONFIGMAP))?.metadata.annotations?.[
        CONFIRM_PRUNE_ANNOTATION
      ],
    ).toBe("a1b2c3");
  });

  it("rollback.md: pause, see the halt, revert in Git, resume", async () => {
    const ns = `doc-rollback-${suffix}`;
    await ensureNamespace(hub, ns);
    // A halted rollout as knative-fleet records it (the state, and the halt's Event on the CR).
    const halt = {
      wave: "canary",
      waveIndex: 0,
      resource: `KnativeServing ${ns}/spoke-1-serving`,
      cluster: "fleet-system/spoke-1",
      hash: "0a1b2c3d",
      commit: "5e6f7a8b9c0d",
      reason: "DeploymentsAvailable=False (activator: 0 of 1 replicas available)",
      at: new Date().toISOString(),
    };
    const state = {
      schema: 2,
      phase: "Halted",
      commit: "5e6f7a8b9c0d",
      startedAt: halt.at,
      waves: {},
      halt,
      crs: {},
    };
    await hub.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace: ns },
      data: { state: JSON.stringify(state) },
    });
    await new EventRecorder({ client: hub, component: "knative-fleet", log: silentLogger }).record(
      {
        apiVersion: OPERATOR_API_VERSION,
        kind: "KnativeServing",
        metadata: { name: "spoke-1-serving", namespace: ns },
      },
      "Warning",
      "RolloutHalted",
      `rollout of 5e6f7a8b9c0d halted in wave canary: ${halt.reason}`,
    );
    // A clone of a fleet repository whose last commit is the bad change.
    const git = (cwd: string, ...args: string[]) =>
      execFileAsync("git", args, { cwd, env: { ...process.env, HOME: work } });
    const origin = join(mkdtempSync(join(work, "origin-")), "fleet.git");
    await git(work, "init", "-q", "--bare", "-b", "main", origin);
    const clone = mkdtempSync(join(work, "clone-"));
    await git(clone, "init", "-q", "-b", "main");
    await git(clone, "config", "user.email", "sre@example.com");
    await git(clone, "config", "user.name", "SRE");
    await git(clone, "remote", "add", "origin", origin);
    writeFileSync(join(clone, "serving.yaml"), "version: 1.22\n");
    await git(clone, "add", ".");
    await git(clone, "commit", "-qm", "Knative 1.22");
    writeFileSync(join(clone, "serving.yaml"), "version: 1.22\nworkloads: [bad]\n");
    await git(clone, "commit", "-qam", "a bad change");
    await git(clone, "push", "-q", "-u", "origin", "main");

    const from = callsSince(0).length;
    const output = await runGuide("rollback.md", { NS: ns, COMMIT: "HEAD" }, { cwd: clone });
    expect(callsSince(from).map((line) => line.split(" ")[0])).toEqual(["1"]); // status: halted
    expect(output).toContain("halted in wave canary");
    expect(output).toMatch(/RolloutHalted\s+knativeserving\/spoke-1-serving/);
    const { stdout: log } = await git(origin, "log", "--format=%s", "main");
    expect(log.split("\n")[0]).toBe('Revert "a bad change"');
    const configMap = await hub.get("v1", "ConfigMap", ns, ROLLOUT_STATE_CONFIGMAP);
    expect(configMap?.metadata.annotations?.[ROLLOUT_PAUSED_ANNOTATION]).toBeUndefined();
  });
});
