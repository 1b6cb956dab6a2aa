import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { down, isUp, memoryKb, readSandbox, up } from "./sandbox.ts";

const usage = `Usage: npm run sandbox -- <up|down|env> [--spokes N] [--light | --bare] [--state-dir DIR]

  up     start a hub and N spokes (default 2) on loopback; builds the binaries the first time
  down   stop exactly the processes 'up' started and remove the state
  env    print shell exports for the running sandbox (eval "$(npm run -s sandbox -- env)")

  --light          spokes run only the controllers an install needs (for 20 spokes on a small machine)
  --bare           spokes are an API server and kwok's stages, no controllers or nodes (up to 60 spokes:
                   installs and upgrades become Ready, deleted namespaces stay Terminating)
  --state-dir DIR   where state, kubeconfigs and logs live (default: $TMPDIR/knative-fleet-sandbox)
`;

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (err) {
    process.stderr.write(`sandbox: ${(err as Error).message}\n${usage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const stateDir = values["state-dir"] ?? join(tmpdir(), "knative-fleet-sandbox");
  switch (positionals[0]) {
    case "up": {
      const spokes = Number(values.spokes ?? "2");
      const most = values.bare ? 60 : 20;
      if (!Number.isInteger(spokes) || spokes < 1 || spokes > most) {
        process.stderr.write(`sandbox: --spokes takes a whole number from 1 to ${most}\n`);
        return 2;
      }
      if (values.light && values.bare) {
        process.stderr.write("sandbox: --light or --bare, not both\n");
        return 2;
      }
      const spokeKind = values.bare ? "bare" : values.light ? "light" : "full";
      const sandbox = await up({ stateDir, spokes, spokeKind });
      process.stderr.write(`sandbox: resident memory ${(memoryKb(stateDir) / 1024).toFixed(0)} MiB\n`);
      process.stdout.write(exports(stateDir, sandbox.hub.adminKubeconfig, sandbox.providerFile));
      return 0;
    }
    case "down": {
      const stopped = await down(stateDir);
      process.stderr.write(`sandbox: stopped ${stopped.length} processes\n`);
      return 0;
    }
    case "env": {
      const sandbox = readSandbox(stateDir);
      if (!sandbox || !isUp(stateDir)) {
        process.stderr.write(`sandbox: not running in ${stateDir}; run 'npm run sandbox -- up'\n`);
        return 1;
      }
      process.stdout.write(exports(stateDir, sandbox.hub.adminKubeconfig, sandbox.providerFile));
      return 0;
    }
    default:
      process.stderr.write(usage);
      return 2;
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    options: {
      spokes: { type: "string" },
      light: { type: "boolean" },
      bare: { type: "boolean" },
      "state-dir": { type: "string" },
    },
    allowPositionals: true,
    strict: true,
  });
}

const exports = (stateDir: string, kubeconfig: string, providerFile: string): string =>
  [
    `export KNATIVE_FLEET_SANDBOX=${stateDir}`,
    `export KUBECONFIG=${kubeconfig}`,
    `export KNATIVE_FLEET_PROVIDER_FILE=${providerFile}`,
    "",
  ].join("\n");

process.exitCode = await main(process.argv.slice(2));
