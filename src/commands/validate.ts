import { stat } from "node:fs/promises";
import { formatDiagnostic } from "../fleet/diagnostic.ts";
import { buildFleetModel } from "../fleet/model.ts";
import { DEFAULT_NAMESPACE } from "../fleet/parse.ts";
import { readFleetDir } from "../fleet/read-dir.ts";
import { DEFAULT_FILE_SELECTION } from "../fleet/select.ts";
import { type Command, EXIT_FINDINGS, EXIT_OK, UsageError } from "./command.ts";

export const validateCommand: Command = {
  name: "validate",
  summary: "Check a fleet repository's files; print every error with file, line and field",
  usage: `Usage: knative-fleet validate [flags] <dir>

Parses and validates every fleet file below <dir>, a checkout of the fleet repository, and prints each
error as 'file:line:column field: message'. Files under ${DEFAULT_FILE_SELECTION.statusDir} never count.
Exit code 1 when any file has an error.

Flags:
  --path-glob GLOB   which files count (default ${DEFAULT_FILE_SELECTION.pathGlob})
  -h, --help         show this help`,
  options: { "path-glob": { type: "string" } },
  allowPositionals: true,
  async run(args, ctx) {
    const [dir, ...extra] = args.positionals;
    if (dir === undefined) throw new UsageError("missing <dir>");
    if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(" ")}`);
    const isDirectory = await stat(dir).then(
      (stats) => stats.isDirectory(),
      () => false,
    );
    if (!isDirectory) throw new UsageError(`${dir} is not a directory`);

    const pathGlob = args.values["path-glob"];
    const selection = { ...DEFAULT_FILE_SELECTION, ...(typeof pathGlob === "string" && { pathGlob }) };
    const files = await readFleetDir(dir, selection);
    const model = buildFleetModel(files, { defaultNamespace: DEFAULT_NAMESPACE });

    for (const diagnostic of model.diagnostics) ctx.stdout.write(`${formatDiagnostic(diagnostic)}\n`);
    // A placement's clusters come from the hub's inventory: offline, only its format is checked.
    const placements = model.placements.length > 0 ? `${model.placements.length} placements, ` : "";
    ctx.stdout.write(
      `${files.length} files, ${model.resources.length} resources, ${placements}${model.diagnostics.length} errors\n`,
    );
    // An empty selection is valid (an empty fleet) but is more often a wrong <dir> or glob.
    if (files.length === 0) {
      ctx.stderr.write(`knative-fleet validate: no file below ${dir} matches ${selection.pathGlob}\n`);
    }
    return model.diagnostics.length > 0 ? EXIT_FINDINGS : EXIT_OK;
  },
};
