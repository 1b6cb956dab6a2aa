import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { commands } from "../../../src/commands/main.ts";
import type { KubeObject } from "../../../src/kube/object.ts";
import { loadSandbox } from "../../sandbox/index.ts";
import { TEST_REPOSITORY } from "../../support/fleet-files.ts";
import { chartDir, renderChart, runHelm, withValuesFile } from "../../support/helm.ts";
import { repoRoot } from "../../support/shared.ts";

// The NOTES `helm install` prints, rendered for real (helm install --dry-run=client, which asks the sandbox
// hub for its version), and every command in them checked against the objects the same values render:
// each names what the chart creates, where it creates it, and what the image runs.

const sandbox = loadSandbox();
const RELEASE = "kf";
const NAMESPACE = "knative-fleet";

interface Deployment {
  spec: {
    template: {
      spec: {
        containers: { name: string; volumeMounts?: { name: string; mountPath: string }[] }[];
        volumes?: { name: string; configMap?: { name: string }; secret?: { secretName: string } }[];
      };
    };
  };
}

function renderNotes(values: object): string {
  const result = withValuesFile(values, (file) =>
    runHelm([
      "install",
      RELEASE,
      chartDir,
      "--namespace",
      NAMESPACE,
      "--dry-run=client",
      "--kubeconfig",
      sandbox.hub.adminKubeconfig,
      "-f",
      file,
      "--set",
      `fleet.repository.url=${TEST_REPOSITORY}`,
    ]),
  );
  if (result.status !== 0) throw new Error(`helm install --dry-run failed: ${result.stderr}`);
  return result.stdout.slice(result.stdout.indexOf("\nNOTES:\n"));
}

/** The commands NOTES show: the indented lines that start with kubectl or helm. */
const commandsOf = (notes: string): string[] =>
  notes
    .split("\n")
    .filter((line) => /^ {5}(kubectl|helm) /.test(line))
    .map((line) => line.trim());

/** Checks one command against the rendered objects; returns what is wrong, or nothing. */
function check(command: string, objects: readonly KubeObject[], values: object): string[] {
  const words = command.split(/\s+/);
  const find = (kind: string, name: string, namespace?: string) =>
    objects.find(
      (o) =>
        o.kind === kind &&
        o.metadata.name === name &&
        (namespace === undefined || (o.metadata.namespace ?? NAMESPACE) === namespace),
    );
  const flag = (name: string) => words[words.indexOf(name) + 1];
  const problems: string[] = [];
  const need = (ok: unknown, what: string) => {
    if (!ok) problems.push(`${command}: ${what}`);
  };
  if (words[0] === "helm") {
    // helm upgrade <release> <chart> -n <ns> --reuse-values --set k=v
    need(words[1] === "upgrade" && words[2] === RELEASE, `upgrades release ${RELEASE}`);
    need(
      existsSync(join(repoRoot, words[3]!, "Chart.yaml")),
      `${words[3]} is the chart's path in the project`,
    );
    need(flag("-n") === NAMESPACE, `in namespace ${NAMESPACE}`);
    const set = flag("--set")!;
    const [key, value] = set.split("=") as [string, string];
    const upgraded = renderChart({ values: { ...values, ...nested(key, value) } });
    if (key === "fleet.repository.credentialsSecretRef.name") {
      const volumes = (find("Deployment", `${RELEASE}-knative-fleet`) as unknown as Deployment | undefined)
        ?.spec.template.spec.volumes;
      need(!volumes?.some((v) => v.secret?.secretName === value), "the secret is not mounted before");
      const after = upgraded.find((o) => o.kind === "Deployment") as unknown as Deployment;
      need(
        after.spec.template.spec.volumes?.some((v) => v.secret?.secretName === value),
        `after it the Deployment mounts Secret ${value}`,
      );
    }
    return problems;
  }
  const namespace = words[1] === "-n" ? words[2] : undefined;
  const rest = namespace ? words.slice(3) : words.slice(1);
  const [verb] = rest;
  if (verb === "create" && rest[1] === "namespace") {
    // The chart reads Secrets in a namespace it does not create: a Role of its own there says which.
    need(
      objects.some((o) => o.kind === "Role" && o.metadata.namespace === rest[2]),
      `the chart grants itself access in namespace ${rest[2]}`,
    );
  } else if (verb === "create" && rest[1] === "secret") {
    const secretsRole = objects.find(
      (o) =>
        o.kind === "Role" &&
        o.metadata.namespace === namespace &&
        (o as unknown as { rules: { resources: string[] }[] }).rules.some((r) =>
          r.resources.includes("secrets"),
        ),
    );
    if (namespace === NAMESPACE) {
      need(rest[3] === "fleet-repository", "the Git credentials Secret the helm upgrade below names");
    } else {
      need(secretsRole, `the plugins may read Secrets in ${namespace}`);
    }
  } else if (["rollout", "logs", "exec"].includes(verb!)) {
    const target = rest.find((w) => w.startsWith("deployment/"))!;
    const deployment = find("Deployment", target.slice("deployment/".length), namespace) as unknown as
      | Deployment
      | undefined;
    need(deployment, `Deployment ${target} in ${namespace}`);
    if (verb === "exec" && deployment) {
      const cli = rest.slice(rest.indexOf("--") + 1);
      need(cli[0] === "knative-fleet", "runs the image's knative-fleet");
      const subcommand = commands.find((c) => c.name === cli[1]);
      need(subcommand, `knative-fleet ${cli[1]} is a command`);
      if (subcommand) {
        const parsed = parseArgs({
          args: cli.slice(2),
          options: subcommand.options,
          allowPositionals: subcommand.allowPositionals,
          strict: true,
        });
        const { containers, volumes } = deployment.spec.template.spec;
        const mounts = containers.find((c) => c.name === "knative-fleet")?.volumeMounts ?? [];
        for (const option of ["config", "clusterprofile-provider-file"]) {
          const file = parsed.values[option] as string | undefined;
          if (file === undefined) continue;
          const mount = mounts.find((m) => file.startsWith(`${m.mountPath}/`));
          const configMap = volumes?.find((v) => v.name === mount?.name)?.configMap?.name;
          const data = (
            objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === configMap) as
              | { data?: Record<string, string> }
              | undefined
          )?.data;
          need(
            data?.[file.slice(mount!.mountPath.length + 1)],
            `--${option} ${file} is a file the pod mounts`,
          );
        }
      }
    }
  } else if (verb === "get") {
    for (const plural of rest[1]!.split(",")) {
      need(
        existsSync(join(chartDir, "crds", `operator.knative.dev_${plural}.yaml`)),
        `the chart ships the CRD of ${plural}`,
      );
    }
  } else if (verb === "describe") {
    const config = parse(
      (
        objects.find(
          (o) => o.kind === "ConfigMap" && o.metadata.name === `${RELEASE}-knative-fleet`,
        ) as unknown as {
          data: Record<string, string>;
        }
      ).data["config.yaml"]!,
    ) as { defaultNamespace: string };
    need(namespace === config.defaultNamespace, `the CRs' default namespace ${config.defaultNamespace}`);
  } else {
    problems.push(`${command}: no check for this command: add one`);
  }
  return problems;
}

/** `a.b.c=v` as the values object helm --set makes of it. */
function nested(key: string, value: string): object {
  return key
    .split(".")
    .reverse()
    .reduce<unknown>((inner, part) => ({ [part]: inner }), value) as object;
}

describe("the chart's NOTES", () => {
  it.each([
    ["the defaults", {}],
    [
      "credentials set, a webhook, two ClusterProfile namespaces",
      {
        fleet: { repository: { credentialsSecretRef: { name: "git" } }, defaultNamespace: "team-a" },
        webhook: { enabled: true, secretRef: { name: "hook" } },
        multicluster: {
          allowedClusterProfileNamespaces: ["fleet-system", "edge"],
          credentials: { namespace: "spoke-creds" },
        },
      },
    ],
    [
      "multicluster off, hub installs on",
      { multicluster: { enabled: false }, hubInstall: { enabled: true } },
    ],
  ])("with %s: every command names what the chart renders", (_name, values) => {
    const notes = renderNotes(values);
    const objects = renderChart({ values });
    const shown = commandsOf(notes);
    expect(shown.length).toBeGreaterThan(3);
    expect(shown.flatMap((command) => check(command, objects, values))).toEqual([]);
  });

  it("sends spoke credentials to the credentials namespace, never the release namespace", () => {
    const notes = renderNotes({});
    expect(notes).toContain("kubectl create namespace knative-fleet-spoke-credentials");
    expect(notes).toContain(
      "kubectl -n knative-fleet-spoke-credentials create secret generic <cluster> --from-literal=token=<token>",
    );
    expect(notes).toContain("knative-fleet clusters --config /etc/knative-fleet/config.yaml");
  });

  it("the chart README's install commands name the namespace, the image and the credentials namespace", () => {
    const readme = readFileSync(join(chartDir, "README.md"), "utf8");
    const install = readme.match(/helm install (?:[^\n]*\\\n)*[^\n]*/)?.[0] ?? "";
    const { version } = parse(readFileSync(join(chartDir, "Chart.yaml"), "utf8")) as { version: string };
    expect(install).toContain("-n knative-fleet");
    // The published chart of this version, whose image defaults to the same release; from a clone, the
    // image a registry serves.
    expect(install).toContain(`oci://ghcr.io/knative-fleet/charts/knative-fleet --version ${version}`);
    expect(readme).toContain("--set image.repository=<registry>/knative-fleet");
    expect(readme).toContain("kubectl create namespace knative-fleet-spoke-credentials");
  });
});
