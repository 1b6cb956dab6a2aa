import { readFile } from "node:fs/promises";
import { type Command, EXIT_OK } from "./command.ts";
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
  -o, --output text|json                text (default) or json: {version, node, kodata: {dir, from,
                                        releases, ingresses, minimumKubernetes}} (kodata absent when none
                                        is found)
  -h, --help                            show this help`,
  options: { ...KODATA_OPTION, ...OUTPUT_OPTION },
  outputFormats: VERSION_FORMATS,
  allowPositionals: false,
  async run(args, ctx) {
    const format = outputFormat(args.values.output, VERSION_FORMATS);
    const version = await packageVersion();
    const location = await findKodata(args.values.kodata);
    const releases = location && (await kodataReleases(location));
    if (format === "json") {
      const kodata = location && { dir: location.dir, from: location.from, ...releases };
      ctx.stdout.write(renderJson({ version, node: process.version, ...(kodata && { kodata }) }));
      return EXIT_OK;
    }
    ctx.stdout.write(`knative-fleet ${version} (Node.js ${process.version})\n`);
    if (location === undefined || releases === undefined) {
      ctx.stdout.write(`Knative releases: none found; ${missingKodataMessage()}\n`);
      return EXIT_OK;
    }
    ctx.stdout.write(`Knative releases in ${location.dir} (${location.from}):\n`);
    for (const line of describeKodata(releases)) ctx.stdout.write(`${line}\n`);
    return EXIT_OK;
  },
};
