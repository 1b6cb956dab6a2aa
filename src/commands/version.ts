import { readFile } from "node:fs/promises";
import { SCHEMA_VERSION } from "../text/schema-version.ts";
import { type Command, type CommandContext, EXIT_OK, type ParsedArgs } from "./command.ts";
import {
  describeKodata,
  findKodata,
  KODATA_FLAG_HELP,
  KODATA_OPTION,
  kodataReleases,
  missingKodataMessage,
} from "./kodata.ts";
import { OUTPUT_OPTION, outputFormat, renderJson } from "./output.ts";

const VERSION_FORMATS = ["text", "json"] as const;

/** package.json beside src/ or dist/: the repository's or the installed package's. */
const PACKAGE_JSON = new URL("../../package.json", import.meta.url);

async function packageVersion(): Promise<string> {
  const { version } = JSON.parse(await readFile(PACKAGE_JSON, "utf8")) as { version: string };
  return version;
}

export const versionCommand: Command = {
  name: "version",
  summary: "Print the version and the Knative releases it can install (also: --version)",
  usage: `Usage: knative-fleet version [--kodata DIR] [-o text|json]

Prints knative-fleet's version, the Node.js it runs on, and the Knative releases in the release manifests
it finds: --kodata, else $KO_DATA_PATH (the image's bundled releases), else the fetched cache.

Flags:
${KODATA_FLAG_HELP}
  -o, --output text|json                text (default) or json: {schemaVersion, version, node, kodata:
                                        {dir, from, releases, ingresses, minimumKubernetes}} (kodata absent
                                        when none is found)
  -h, --help                            show this help`,
  options: { ...KODATA_OPTION, ...OUTPUT_OPTION },
  outputFormats: VERSION_FORMATS,
  allowPositionals: false,
  async run(args, ctx) {
    return printVersion(args, ctx, false);
  },
};

/**
 * `knative-fleet -v` (or `--version`) alone: the version line, the releases when there are any, and when
 * there are none one short line, not `version`'s whole how-to-fetch message (a first `-v` on a fresh
 * install is no error).
 */
export const printBriefVersion = (ctx: CommandContext): Promise<number> =>
  printVersion({ values: {}, positionals: [] }, ctx, true);

/** The version, then the releases found; `brief`: without the message of how to get them. */
async function printVersion(args: ParsedArgs, ctx: CommandContext, brief: boolean): Promise<number> {
  const format = outputFormat(args.values.output, VERSION_FORMATS);
  const version = await packageVersion();
  const location = await findKodata(args.values.kodata);
  const releases = location && (await kodataReleases(location));
  if (format === "json") {
    const kodata = location && { dir: location.dir, from: location.from, ...releases };
    ctx.stdout.write(
      renderJson({
        schemaVersion: SCHEMA_VERSION,
        version,
        node: process.version,
        ...(kodata && { kodata }),
      }),
    );
    return EXIT_OK;
  }
  ctx.stdout.write(`knative-fleet ${version} (Node.js ${process.version})\n`);
  if (location === undefined || releases === undefined) {
    ctx.stdout.write(
      brief ? `${BRIEF_NO_RELEASES}\n` : `Knative releases: none found; ${missingKodataMessage()}\n`,
    );
    return EXIT_OK;
  }
  ctx.stdout.write(`Knative releases in ${location.dir} (${location.from}):\n`);
  for (const line of describeKodata(releases)) ctx.stdout.write(`${line}\n`);
  return EXIT_OK;
}

/** What `-v` says when no release manifests are found: short, and where to read more. */
export const BRIEF_NO_RELEASES =
  "Knative releases: none found yet (needed by plan; 'knative-fleet version' says how to fetch them)";
