import { access, stat } from "node:fs/promises";
import { dirname, relative, resolve, sep } from "node:path";
import { type Diagnostic, formatDiagnostic, isError } from "../fleet/diagnostic.ts";
import { formatIdentity } from "../fleet/identity.ts";
import { boundedDiagnostics, type FleetFile, type FleetModel } from "../fleet/model.ts";
import { readFleetDir, yamlFilesLeftOut } from "../fleet/read-dir.ts";
import { DEFAULT_FILE_SELECTION } from "../fleet/select.ts";
import type { PlacementSync } from "../placement/combine.ts";
import type { Inventory } from "../placement/inventory.ts";
import { createKodataSource, ReleaseLoader } from "../render/index.ts";
import { checkFleetSettings, checkPlacementSettings } from "../render/settings-check.ts";
import { type FleetSettings, hubCrPolicy } from "../sync/settings.ts";
import { expandedModel } from "../sync/sync.ts";
import { count } from "../text/count.ts";
import { SCHEMA_VERSION } from "../text/schema-version.ts";
import { commandSettings } from "./access-settings.ts";
import { githubAnnotations, githubNotice, gitlabCodeQuality } from "./annotations.ts";
import { type Command, EXIT_FINDINGS, EXIT_OK, UsageError } from "./command.ts";
import { findKodata, KODATA_FLAG_HELP, KODATA_OPTION } from "./kodata.ts";
import { OUTPUT_OPTION, outputFormat, renderJson } from "./output.ts";
import {
  admissionDiagnostics,
  FieldLocator,
  readClusterProfiles,
  type SkippedCheck,
  versionDiagnostics,
} from "./validate-checks.ts";

const VALIDATE_FORMATS = ["text", "json", "github", "gitlab"] as const;
type ValidateFormat = (typeof VALIDATE_FORMATS)[number];

export interface ValidateReport {
  schemaVersion: typeof SCHEMA_VERSION;
  /** The repository root the paths are relative to. */
  root: string;
  files: number;
  resources: number;
  placements: number;
  errors: number;
  warnings: number;
  diagnostics: {
    file: string;
    line: number;
    column: number;
    field: string;
    message: string;
    severity: "error" | "warning";
  }[];
  /** Diagnostics left out by the bounds (20 a file, 500 in all); counted in errors/warnings. */
  omitted: number;
  skipped: SkippedCheck[];
}

export const validateCommand: Command = {
  name: "validate",
  summary: "Check a fleet repository's files; print every error with file, line and field",
  usage: `Usage: knative-fleet validate [flags] <dir>
       knative-fleet validate [flags] <file>...

Runs the checks \`plan\` runs on one tree, offline: every fleet file below <dir>, a checkout of the fleet
repository, is parsed and validated and each finding printed as 'file:line:column field: message'. Files
under ${DEFAULT_FILE_SELECTION.statusDir} never count. Given files (as pre-commit passes them), their
repository is the one around them (the nearest folder with .git, else their common folder): only those files
are reported, but checks across files (the same CR twice, two placements on one cluster) see the whole tree.

Checked: the schema; the hub's admission (the CR's namespace, ClusterProfile namespace, a CR without
clusterProfileRef while hub installs are off, manifest locations) by --config or the defaults; with
release manifests, every spec.version (a placement's template and overrides too, expanded or not);
placements listing their clusters are expanded and their conflicts found, and with --cluster-profiles so
are those selecting by labels, properties or PlacementDecisions. A check that could not run is named on
stderr (and under "skipped" in -o json). YAML files the file glob leaves out are listed on stderr.
Exit code 1 when any file has an error, or when no file below <dir> matches the glob; 2 on usage errors.

Flags:
  --config FILE                         the service's config file: its file selection, default namespace
                                        and admission
${KODATA_FLAG_HELP}
  --cluster-profiles PATH               ClusterProfiles and PlacementDecisions (a kubectl -o yaml list, or a
                                        folder of them) that placements select from, as plan takes them
  --path-glob GLOB                      which files count (default: the config's, else
                                        ${DEFAULT_FILE_SELECTION.pathGlob})
  -o, --output FORMAT                   text (default); json ({schemaVersion, diagnostics, skipped, counts});
                                        github (workflow commands: annotations on the pull request); gitlab
                                        (a Code Quality report for artifacts:reports:codequality)
  -h, --help                            show this help`,
  options: {
    "path-glob": { type: "string" },
    config: { type: "string" },
    "cluster-profiles": { type: "string" },
    ...KODATA_OPTION,
    ...OUTPUT_OPTION,
  },
  outputFormats: VALIDATE_FORMATS,
  allowPositionals: true,
  async run(args, ctx) {
    const text = (name: string) =>
      typeof args.values[name] === "string" ? (args.values[name] as string) : undefined;
    const format: ValidateFormat = outputFormat(args.values.output, VALIDATE_FORMATS);
    const target = await validateTarget(args.positionals);
    const { settings } = commandSettings(text("config"));
    const pathGlob = text("path-glob");
    const selection = { ...settings.selection, ...(pathGlob !== undefined && { pathGlob }) };
    const kodata = await findKodata(args.values.kodata);
    const profiles = text("cluster-profiles");
    const inventory: Inventory =
      profiles === undefined
        ? { clusters: undefined, decisions: undefined }
        : await readClusterProfiles(profiles);

    const files = await readFleetDir(target.root, selection);
    // The sync's first step, offline: placements are expanded against what is known of the clusters, so
    // their conflicts and merged specs are checked here as the service checks them.
    const { model, selections } = expandedModel(files, settings, inventory);
    const locator = new FieldLocator(files, model.placements);
    const skipped: SkippedCheck[] = [];
    const found: Diagnostic[] = [
      ...model.diagnostics,
      ...admissionDiagnostics(model.resources, hubCrPolicy(settings, kodata?.dir), locator),
    ];
    found.push(
      ...(await releaseDiagnostics(kodata?.dir, settings, model, files, selections, locator, skipped)),
    );
    const reported = (path: string) => isReported(target, path);
    for (const selection of selections) {
      if (selection.pending === undefined || !reported(selection.path)) continue;
      skipped.push({
        check: "placement",
        message: `${formatIdentity(selection)} is not expanded: ${selection.pending}; give --cluster-profiles to check its CRs and conflicts`,
        file: selection.path,
        line: selection.line,
      });
    }

    const { report, shown } = validateReport(target, files, model, found, skipped);
    ctx.stdout.write(render(format, report, shown));
    const say = (line: string) => ctx.stderr.write(`knative-fleet validate: ${line}\n`);
    if (format === "gitlab" || format === "json") say(summary(report));
    for (const check of skipped)
      say(`skipped: ${check.file ? `${check.file}:${check.line}: ` : ""}${check.message}`);
    if (target.files === undefined && files.length === 0)
      say(`no file below ${target.root} matches ${selection.pathGlob}`);
    const leftOut = (await yamlFilesLeftOut(target.root, selection)).filter(reported);
    if (leftOut.length > 0) {
      const listed = leftOut.slice(0, MAX_LISTED);
      const more = leftOut.length > MAX_LISTED ? `, … ${leftOut.length - MAX_LISTED} more` : "";
      say(
        `${count(leftOut.length, "YAML file")} ${leftOut.length === 1 ? "is not a fleet file" : "are not fleet files"} (${selection.pathGlob} leaves ${leftOut.length === 1 ? "it" : "them"} out): ${listed.join(", ")}${more}`,
      );
    }
    return report.errors > 0 ? EXIT_FINDINGS : EXIT_OK;
  },
};

/**
 * The checks that need the release manifests: spec.version, and what a release knows a CR may set
 * (ConfigMaps and keys, workload names, ingresses), as plan and the sync check it; offline no CR runs a
 * version yet, so the upgrade warnings are plan's alone. Without manifests they are skipped, and say so.
 */
async function releaseDiagnostics(
  kodataDir: string | undefined,
  settings: FleetSettings,
  model: FleetModel,
  files: readonly FleetFile[],
  selections: PlacementSync["selections"],
  locator: FieldLocator,
  skipped: SkippedCheck[],
): Promise<Diagnostic[]> {
  if (kodataDir === undefined) {
    skipped.push({
      check: "versions",
      message:
        "no release manifests found (--kodata, $KO_DATA_PATH, the fetched cache): spec.version and the settings a release knows are not checked",
    });
    return [];
  }
  const source = createKodataSource({ dir: kodataDir, policy: settings.locations });
  const releases = new ReleaseLoader(source);
  // A placement not expanded (no inventory) makes no CR: its template and each override are checked.
  const unexpanded = model.placements.filter(({ path, placement }) =>
    selections.some(
      (s) =>
        s.pending !== undefined &&
        s.path === path &&
        s.namespace === placement.metadata.namespace &&
        s.name === placement.metadata.name,
    ),
  );
  return [
    ...(await versionDiagnostics(model.resources, model.placements, source, locator)),
    ...(await checkFleetSettings(model.resources, files, releases)),
    ...(await checkPlacementSettings(unexpanded, releases)),
  ];
}

/** The report of the files `target` names: each finding counted and shown once, within the bounds. */
function validateReport(
  target: ValidateTarget,
  files: readonly FleetFile[],
  model: FleetModel,
  found: readonly Diagnostic[],
  skipped: SkippedCheck[],
): { report: ValidateReport; shown: Diagnostic[] } {
  const reported = (path: string) => isReported(target, path);
  // A placement's CRs share its fields, so their findings repeat: each is counted and shown once.
  const all = [
    ...new Map(
      found
        .filter((diagnostic) => reported(diagnostic.path))
        .map((d) => [JSON.stringify([d.path, d.line, d.column, d.field, d.message, d.severity]), d]),
    ).values(),
  ];
  // No file at all is more often a wrong <dir> or glob than an empty fleet: the service would prune it all.
  const noFiles = target.files === undefined && files.length === 0;
  const shown = boundedDiagnostics(all);
  const errors = all.filter(isError).length + (target.files === undefined ? model.omittedDiagnostics : 0);
  const warnings = all.length - all.filter(isError).length;
  const report: ValidateReport = {
    schemaVersion: SCHEMA_VERSION,
    root: target.root,
    files: files.filter((file) => reported(file.path)).length,
    resources: model.resources.filter((resource) => reported(resource.path)).length,
    placements: model.placements.filter((placement) => reported(placement.path)).length,
    errors: errors + (noFiles ? 1 : 0),
    warnings,
    diagnostics: shown.map(({ path, line, column, field, message, severity }) => ({
      file: path,
      line,
      column,
      field,
      message,
      severity: severity ?? "error",
    })),
    omitted: errors + warnings - shown.length,
    skipped,
  };

  return { report, shown };
}

/** YAML files left out by the glob, named on the line that says so. */
const MAX_LISTED = 10;

function render(format: ValidateFormat, report: ValidateReport, shown: readonly Diagnostic[]): string {
  if (format === "json") return renderJson(report);
  if (format === "gitlab") return gitlabCodeQuality(shown);
  const lines =
    format === "github"
      ? githubAnnotations(shown) +
        report.skipped.map((check) => githubNotice(check.message, check.file, check.line)).join("")
      : shown
          .map((d) => `${formatDiagnostic(isError(d) ? d : { ...d, message: `warning: ${d.message}` })}\n`)
          .join("");
  const omittedWarnings = report.warnings - shown.filter((d) => !isError(d)).length;
  const omittedErrors = report.omitted - omittedWarnings;
  const omitted = [
    ...(omittedErrors > 0 ? [count(omittedErrors, "more error")] : []),
    ...(omittedWarnings > 0 ? [count(omittedWarnings, "more warning")] : []),
  ];
  const more = omitted.length > 0 ? `… ${omitted.join(" and ")} left out\n` : "";
  return `${lines}${more}${summary(report)}\n`;
}

/** `2 files, 1 resource, 1 placement, 0 errors`: the counts, each worded for its number. */
export function summary(report: ValidateReport): string {
  return [
    count(report.files, "file"),
    count(report.resources, "resource"),
    ...(report.placements > 0 ? [count(report.placements, "placement")] : []),
    count(report.errors, "error"),
    ...(report.warnings > 0 ? [count(report.warnings, "warning")] : []),
  ].join(", ");
}

/** What validate reads: a repository root, and the files to report (all when undefined). */
interface ValidateTarget {
  root: string;
  files?: Set<string>;
}

const isReported = (target: ValidateTarget, path: string): boolean =>
  target.files === undefined || target.files.has(path);

async function validateTarget(positionals: readonly string[]): Promise<ValidateTarget> {
  if (positionals.length === 0) throw new UsageError("missing <dir> or <file>...");
  const kinds = await Promise.all(
    positionals.map((path) =>
      stat(path).then(
        (stats) => (stats.isDirectory() ? "dir" : stats.isFile() ? "file" : "other"),
        () => "missing",
      ),
    ),
  );
  if (kinds[0] === "dir") {
    if (positionals.length > 1)
      throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(" ")}`);
    return { root: positionals[0]! };
  }
  const bad = positionals.findIndex((_, index) => kinds[index] !== "file");
  if (bad !== -1)
    throw new UsageError(
      `${positionals[bad]} is not a ${kinds[bad] === "dir" ? "file (give one <dir>, or files)" : "file or directory"}`,
    );
  const absolute = positionals.map((path) => resolve(path));
  const root = await repositoryRoot(commonFolder(absolute.map(dirname)));
  return { root, files: new Set(absolute.map((path) => relative(root, path).split(sep).join("/"))) };
}

function commonFolder(folders: readonly string[]): string {
  let common = folders[0]!;
  for (const folder of folders.slice(1)) {
    while (folder !== common && !folder.startsWith(common.endsWith(sep) ? common : `${common}${sep}`))
      common = dirname(common);
  }
  return common;
}

/** The nearest folder at or above `folder` holding `.git` (a clone or a worktree); else `folder` itself. */
async function repositoryRoot(folder: string): Promise<string> {
  for (let current = folder; ; current = dirname(current)) {
    if (
      await access(resolve(current, ".git")).then(
        () => true,
        () => false,
      )
    )
      return current;
    if (dirname(current) === current) return folder;
  }
}
