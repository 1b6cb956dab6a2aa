import { execFile } from "node:child_process";
import { chmod, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { repoRoot } from "./shared.ts";

// What the CI-example tests need to run a step of a CI file as its CI would: the step's script with the
// CI's `${{ expressions }}` replaced from a fixture, in the runner's shell, and `docker run IMAGE` as the CLI
// on this machine (the image's entrypoint is the CLI).

/** A step of a GitHub-style workflow (GitHub Actions, Gitea Actions). */
export interface Step {
  name?: string;
  id?: string;
  uses?: string;
  run?: string;
  env?: Record<string, string>;
  with?: Record<string, string | number | boolean>;
}

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** `script` run by `shell` (its argv before the script, e.g. `["sh", "-e", "-c"]`); never rejects. */
export function runScript(
  shell: string[],
  script: string,
  env: Record<string, string>,
  cwd: string,
): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(shell[0]!, [...shell.slice(1), script], { env, cwd, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** `${{ expression }}` replaced from `values`; an expression the fixture does not know fails the test. */
export function substitute(text: string, values: Record<string, string>): string {
  return text.replace(/\$\{\{\s*([^}]+?)\s*\}\}/g, (_, expression: string) => {
    if (!(expression in values)) throw new Error(`the fixture has no value for \${{ ${expression} }}`);
    return values[expression]!;
  });
}

/**
 * Writes into `bin` a `knative-fleet` that runs this checkout's CLI, and a `docker` that runs the image:
 * `docker run [--rm] [-i] [--user U] [-v HOST:CONTAINER[:ro]]... [-e NAME[=VALUE]]... [--entrypoint CMD]
 * IMAGE ARGS` runs the entrypoint (the CLI unless --entrypoint) with container paths in ARGS mapped to the
 * volumes' host paths, in an environment like the container's: only what `-e` passes, plus what the image
 * sets (KO_DATA_PATH, the bundled releases) and PATH, HOME and TMPDIR. Any other flag fails, as a step that needs
 * more than this shim knows would not be tested.
 */
export async function installCliShims(bin: string): Promise<void> {
  const cli = join(bin, "knative-fleet");
  await writeFile(cli, `#!/bin/sh\nexec "${process.execPath}" "${join(repoRoot, "src/cli.ts")}" "$@"\n`);
  await writeFile(
    join(bin, "docker"),
    `#!/bin/bash
[ "$1" = run ] || { echo "docker shim: only run" >&2; exit 125; }
shift
maps=()
envs=("PATH=$PATH" "HOME=$HOME" "KO_DATA_PATH=$KO_DATA_PATH")
# Where the runner's temporary files go, so that a test can clean up what the "container" left.
if [ -n "\${TMPDIR:-}" ]; then envs+=("TMPDIR=$TMPDIR"); fi
entry=knative-fleet
while [ $# -gt 0 ]; do
  case "$1" in
    --rm | -i) shift ;;
    --user) shift 2 ;;
    -v) maps+=("$2"); shift 2 ;;
    -e)
      case "$2" in
        *=*) envs+=("$2") ;;
        *) if [ -n "\${!2+x}" ]; then envs+=("$2=\${!2}"); fi ;;
      esac
      shift 2 ;;
    --entrypoint) entry="$2"; shift 2 ;;
    -*) echo "docker shim: unknown flag $1" >&2; exit 125 ;;
    *) break ;;
  esac
done
shift
args=()
for arg in "$@"; do
  for map in "\${maps[@]}"; do
    host="\${map%%:*}"; rest="\${map#*:}"; inside="\${rest%%:*}"
    case "$arg" in "$inside" | "$inside"/*) arg="$host\${arg#"$inside"}" ;; esac
  done
  args+=("$arg")
done
exec env -i "\${envs[@]}" "$entry" "\${args[@]}"
`,
  );
  await chmod(cli, 0o755);
  await chmod(join(bin, "docker"), 0o755);
}
