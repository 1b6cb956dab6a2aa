import { stat } from "node:fs/promises";
import { admitHubCr, type HubCrPolicy } from "../admission/hub-cr.ts";
import { type Diagnostic, formatDiagnostic } from "../fleet/diagnostic.ts";
import { formatIdentity, identityOf } from "../fleet/identity.ts";
import { boundedDiagnostics, type DesiredResource } from "../fleet/model.ts";
import { readFleetDir, yamlFilesLeftOut } from "../fleet/read-dir.ts";
import { DEFAULT_FILE_SELECTION } from "../fleet/select.ts";
import { COMPONENT_OF_KIND, type Component, createKodataSource, resolveVersion } from "../render/index.ts";
import { hubCrPolicy } from "../sync/settings.ts";
import { expandedModel } from "../sync/sync.ts";
import { commandSettings } from "./access-settings.ts";
import { type Command, EXIT_FINDINGS, EXIT_OK, UsageError } from "./command.ts";

export const validateCommand: Command = {
  name: "validate",
  summary: "Check a fleet repository's files; print every error with file, line and field",
  usage: `Usage: knative-fleet validate [flags] <dir>

Parses and validates every fleet file below <dir>, a checkout of the fleet repository, and prints each
error as 'file:line:column field: message'. Files under ${DEFAULT_FILE_SELECTION.statusDir} never count.
A CR the service's hub admission refuses is an error too (its namespace, ClusterProfile namespace, a CR
without clusterProfileRef while hub installs are off, manifest locations), by --config or the defaults;
with release manifests (--kodata), so is a spec.version no release has, a placement's as a file's.
YAML files the file glob leaves out are listed on stderr. Exit code 1 when any file has an error, or when
no file matches the glob.

Flags:
  --config FILE      the service's config file: its file selection, default namespace and admission
  --kodata DIR       Knative release manifests in the kodata layout (default $KO_DATA_PATH): check versions
  --path-glob GLOB   which files count (default: the config's, else ${DEFAULT_FILE_SELECTION.pathGlob})
  -h, --help         show this help`,
  options: { "path-glob": { type: "string" }, config: { type: "string" }, kodata: { type: "string" } },
  allowPositionals: true,
  async run(args, ctx) {
    const [dir, ...extra] = args.positionals;
    if (dir === undefined) throw new UsageError("missing <dir>");
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`);
    if (!(await isDirectory(dir))) throw new UsageError(`${dir} is not a directory`);
    const text = (name: string) =>
      typeof args.values[name] === "string" ? (args.values[name] as string) : undefined;
    const { settings } = commandSettings(text("config"));
    const pathGlob = text("path-glob");
    const selection = { ...settings.selection, ...(pathGlob !== undefined && { pathGlob }) };
    const kodata = text("kodata") ?? process.env.KO_DATA_PATH;
    if (kodata !== undefined && !(await isDirectory(kodata)))
      throw new UsageError(`--kodata ${kodata} is not a directory`);

    const files = await readFleetDir(dir, selection);
    // The sync's first step, offline: a placement that reads the inventory is not expanded; one that lists
    // its clusters is, so its conflicts and merged specs are checked here as the service checks them.
    const { model } = expandedModel(files, settings, { clusters: undefined, decisions: undefined });
    const refused = admissionDiagnostics(model.resources, hubCrPolicy(settings, kodata));
    const versionErrors = kodata === undefined ? [] : await versionDiagnostics(model.resources, kodata);
    // No file at all is more often a wrong <dir> or glob than an empty fleet: the service would prune it all.
    const noFiles = files.length === 0 ? 1 : 0;
    const errors =
      model.diagnostics.length + model.omittedDiagnostics + refused.length + versionErrors.length + noFiles;
    // Within the model's bounds: a placement's CRs share its version, and so its version error.
    const shown = boundedDiagnostics([...model.diagnostics, ...refused, ...versionErrors]);
    for (const diagnostic of shown) ctx.stdout.write(`${formatDiagnostic(diagnostic)}\n`);
    if (errors - noFiles > shown.length)
      ctx.stdout.write(`… ${errors - noFiles - shown.length} more errors left out\n`);
    const placements = model.placements.length > 0 ? `${model.placements.length} placements, ` : "";
    ctx.stdout.write(
      `${files.length} files, ${model.resources.length} resources, ${placements}${errors} errors\n`,
    );
    if (noFiles)
      ctx.stderr.write(`knative-fleet validate: no file below ${dir} matches ${selection.pathGlob}\n`);
    const leftOut = await yamlFilesLeftOut(dir, selection);
    if (leftOut.length > 0) {
      const listed = leftOut.slice(0, MAX_LISTED);
      const more = leftOut.length > MAX_LISTED ? `, … ${leftOut.length - MAX_LISTED} more` : "";
      ctx.stderr.write(
        `knative-fleet validate: ${leftOut.length} YAML files are not fleet files (${selection.pathGlob} leaves them out): ${listed.join(", ")}${more}\n`,
      );
    }
    return errors > 0 ? EXIT_FINDINGS : EXIT_OK;
  },
};

/** YAML files left out by the glob, named on the line that says so. */
const MAX_LISTED = 10;

/** What the hub admission refuses, as the mirror decides it: the CR is never written, nothing is pruned. */
function admissionDiagnostics(resources: readonly DesiredResource[], policy: HubCrPolicy): Diagnostic[] {
  return resources.flatMap(({ resource, path, line }): Diagnostic[] => {
    const refusal = admitHubCr(resource, policy);
    if (refusal === undefined) return [];
    const message = `${refusal.message}; the hub refuses ${formatIdentity(identityOf(resource))}`;
    return [{ path, line, column: 1, field: refusal.field, message }];
  });
}

/**
 * A spec.version no release in kodata has: the service refuses such a CR (VersionMigrationEligible False),
 * so validate does too, listing the versions there are. With spec.manifests the CR brings its own release.
 */
async function versionDiagnostics(
  resources: readonly DesiredResource[],
  kodata: string,
): Promise<Diagnostic[]> {
  const source = createKodataSource({ dir: kodata });
  const available = new Map<Component, readonly string[]>();
  const diagnostics: Diagnostic[] = [];
  for (const { resource, path, line } of resources) {
    const { spec } = resource;
    if ((spec.manifests ?? []).length > 0) continue;
    const component = COMPONENT_OF_KIND[resource.kind];
    if (!available.has(component)) available.set(component, await source.componentVersions(component));
    try {
      resolveVersion(spec.version, available.get(component)!, resource.kind);
    } catch (error) {
      diagnostics.push({ path, line, column: 1, field: "spec.version", message: (error as Error).message });
    }
  }
  return diagnostics;
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (stats) => stats.isDirectory(),
    () => false,
  );
}
