import { readFile } from "node:fs/promises";
import { type Command, EXIT_OK } from "./command.ts";
import {
  describeKodata,
  findKodata,
  KODATA_FLAG_HELP,
  KODATA_OPTION,
  missingKodataMessage,
} from "./kodata.ts";

/** package.json beside src/ or dist/: the repository's or the installed package's. */
const PACKAGE_JSON = new URL("../../package.json", import.meta.url);

export async function packageVersion(): Promise<string> {
  const { version } = JSON.parse(await readFile(PACKAGE_JSON, "utf8")) as { version: string };
  return version;
}

export const versionCommand: Command = {
  name: "version",
  summary: "Print the version and the Knative releases it can install (also: --version)",
  usage: `Usage: knative-fleet version [--kodata DIR]

Prints knative-fleet's version, the Node.js it runs on, and the Knative releases in the release manifests
it finds: --kodata, else $KO_DATA_PATH (the image's bundled releases), else the fetched cache.

Flags:
${KODATA_FLAG_HELP}
  -h, --help     show this help`,
  options: KODATA_OPTION,
  allowPositionals: false,
  async run(args, ctx) {
    ctx.stdout.write(`knative-fleet ${await packageVersion()} (Node.js ${process.version})\n`);
    const location = await findKodata(args.values.kodata);
    if (location === undefined) {
      ctx.stdout.write(`Knative releases: none found; ${missingKodataMessage()}\n`);
      return EXIT_OK;
    }
    ctx.stdout.write(`Knative releases in ${location.dir} (${location.from}):\n`);
    for (const line of await describeKodata(location)) ctx.stdout.write(`${line}\n`);
    return EXIT_OK;
  },
};
