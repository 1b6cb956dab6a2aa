import { type Command, UsageError } from "./command.ts";
import { DYNAMIC_VALUES } from "./complete.ts";

// `knative-fleet completion bash|zsh|fish`: a completion script written from the commands' own flag
// definitions, so it never lists a flag a command does not take. Commands, flags, and the -o/--output
// formats complete; --context the kubeconfig's contexts, -n/--namespace the hub's namespaces (when it
// answers within a moment), --base/--head the repository's branches and tags, each asked of
// `knative-fleet __complete` (complete.ts) at the Tab; other flag values and positional arguments complete
// as file names.

const SHELLS = ["bash", "zsh", "fish"] as const;
type Shell = (typeof SHELLS)[number];

interface Flag {
  long: string;
  short?: string;
  takesValue: boolean;
  /** The values offered for it; files when undefined (and not dynamic). */
  values?: readonly string[];
  /** Values asked of `knative-fleet __complete <dynamic>` at the Tab. */
  dynamic?: string;
  description: string;
}

/** The command `completion`, over the command list it is given (main's, which includes it). */
export function completionCommand(commands: () => readonly Command[]): Command {
  return {
    name: "completion",
    summary: "Print a shell completion script (bash, zsh or fish)",
    usage: `Usage: knative-fleet completion bash|zsh|fish

Prints a script that completes knative-fleet's commands, flags and output formats in that shell.
  bash:  source <(knative-fleet completion bash)      (or save it in /etc/bash_completion.d/knative-fleet)
  zsh:   source <(knative-fleet completion zsh)       (or save it as _knative-fleet in a directory of $fpath)
  fish:  knative-fleet completion fish | source       (or save it in ~/.config/fish/completions/knative-fleet.fish)

Flags:
  -h, --help     show this help`,
    options: {},
    positionals: SHELLS,
    allowPositionals: true,
    async run({ positionals }, ctx) {
      const [shell, ...extra] = positionals;
      if (shell === undefined || !(SHELLS as readonly string[]).includes(shell) || extra.length > 0)
        throw new UsageError(`name one shell: ${SHELLS.join(", ")}`);
      ctx.stdout.write(completionScript(shell as Shell, commands()));
      return 0;
    },
  };
}

export function completionScript(shell: Shell, commands: readonly Command[]): string {
  if (shell === "bash") return bashScript(commands);
  if (shell === "zsh") return zshScript(commands);
  return fishScript(commands);
}

/** A command's flags, -h/--help included, each with the description its --help gives it. */
function flagsOf(command: Command): Flag[] {
  const flags = Object.entries(command.options).map(([long, option]) => ({
    long,
    short: option.short,
    takesValue: option.type === "string",
    values: long === "output" ? command.outputFormats : undefined,
    dynamic:
      option.type === "string" && Object.hasOwn(DYNAMIC_VALUES, long)
        ? DYNAMIC_VALUES[long as keyof typeof DYNAMIC_VALUES]
        : undefined,
    description: flagDescription(command.usage, long),
  }));
  return [...flags, { long: "help", short: "h", takesValue: false, description: "show this help" }];
}

/**
 * The text after a flag's line in the usage (`  -o, --output FORMAT   output format (default table)`),
 * with the lines that continue it (indented to its column), whole.
 */
function flagDescription(usage: string, long: string): string {
  const lines = usage.split("\n");
  const pattern = new RegExp(`^(\\s+(?:-\\w, )?--${long}(?: \\S+)?\\s{2,})(\\S.*)$`);
  const index = lines.findIndex((line) => pattern.test(line));
  if (index === -1) return "";
  const [, lead, first] = pattern.exec(lines[index]!)!;
  const column = lead!.length;
  const rest: string[] = [];
  for (const line of lines.slice(index + 1)) {
    if (line.length <= column || line.slice(0, column).trim() !== "") break;
    rest.push(line.trim());
  }
  return [first!.trim(), ...rest].join(" ");
}

const TOP_FLAGS = ["-h", "--help", "-v", "--version"];

function bashScript(commands: readonly Command[]): string {
  const cases = commands.map((command) => {
    const flags = flagsOf(command);
    const spellings = (flag: Flag) => [...(flag.short ? [`-${flag.short}`] : []), `--${flag.long}`];
    const valueCases = flags
      .filter((flag) => flag.values !== undefined)
      .map((flag) => `        ${spellings(flag).join("|")}) words="${flag.values!.join(" ")}" ;;`);
    // Asked of the CLI itself (the name typed, so a path or an alias works too); when it offers nothing, no
    // file names either (compopt needs bash 4; outside a completion it is a no-op).
    const dynamicCases = flags
      .filter((flag) => flag.dynamic !== undefined)
      .map(
        (flag) =>
          `        ${spellings(flag).join("|")}) compopt +o default 2>/dev/null; words=$("\${COMP_WORDS[0]}" __complete ${flag.dynamic} "\${COMP_WORDS[@]}" 2>/dev/null) ;;`,
      );
    const takesFile = flags
      .filter((flag) => flag.takesValue && flag.values === undefined && flag.dynamic === undefined)
      .flatMap(spellings);
    const positionals = command.positionals ? ` words="${command.positionals.join(" ")}"` : "";
    return [
      `    ${command.name})`,
      `      case "$prev" in`,
      ...valueCases,
      ...dynamicCases,
      ...(takesFile.length > 0 ? [`        ${takesFile.join("|")}) return ;;`] : []),
      `        *) if [[ "$cur" == -* ]]; then words="${flags.flatMap(spellings).join(" ")}";${positionals ? ` else${positionals};` : ""} fi ;;`,
      `      esac ;;`,
    ].join("\n");
  });
  return `# knative-fleet completion for bash: source <(knative-fleet completion bash)
_knative_fleet() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="\${COMP_WORDS[COMP_CWORD-1]}" words=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${commands.map((c) => c.name).join(" ")} ${TOP_FLAGS.join(" ")}" -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
${cases.join("\n")}
  esac
  # Nothing offered: bash completes file names (complete -o default).
  [ -n "$words" ] && COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _knative_fleet knative-fleet
`;
}

/** Single-quoted for zsh and fish: ' becomes '\\''. */
const quote = (text: string): string => `'${text.replaceAll("'", "'\\''")}'`;
/** zsh _arguments and _describe read `[`, `]` and `:` in their specs. */
const zshText = (text: string): string => text.replace(/[[\]:]/g, (c) => `\\${c}`);

function zshScript(commands: readonly Command[]): string {
  const described = commands.map((c) => `    ${quote(`${c.name}:${zshText(c.summary)}`)}`);
  const cases = commands.map((command) => {
    const specs = flagsOf(command).map((flag) => {
      const names = flag.short ? `{-${flag.short},--${flag.long}}` : `--${flag.long}`;
      const exclusive = flag.short ? `'(-${flag.short} --${flag.long})'` : "";
      const action = !flag.takesValue
        ? ""
        : flag.values
          ? `:${flag.long}:(${flag.values.join(" ")})`
          : flag.dynamic
            ? `:${flag.long}:_knative_fleet_values ${flag.dynamic}`
            : `:${flag.long}:_files`;
      return `${exclusive}${names}${quote(`[${zshText(flag.description)}]${action}`)}`;
    });
    const positional = command.positionals
      ? [quote(`1:${command.name}:(${command.positionals.join(" ")})`)]
      : command.allowPositionals
        ? [quote("*:file:_files")]
        : [];
    return `    ${command.name}) _arguments -s ${[...specs, ...positional].join(" ")} ;;`;
  });
  return `#compdef knative-fleet
# knative-fleet completion for zsh: source <(knative-fleet completion zsh), or save as _knative-fleet in $fpath
# Values the CLI itself knows (contexts, namespaces, refs): asked of the command typed, one a line.
_knative_fleet_values() {
  local -a values
  values=(\${(f)"$("$_knative_fleet_program" __complete "$1" "\${(@)words}" 2>/dev/null)"})
  compadd -a values
}
_knative_fleet() {
  local _knative_fleet_program="$words[1]"
  local -a commands
  commands=(
${described.join("\n")}
  )
  if (( CURRENT == 2 )); then
    _describe -t commands 'knative-fleet command' commands
    return
  fi
  local command="$words[2]"
  shift words
  (( CURRENT-- ))
  case "$command" in
${cases.join("\n")}
  esac
}
if [ "$funcstack[1]" = "_knative_fleet" ]; then
  _knative_fleet "$@"
else
  # Sourced: the completion system is started first when the shell has not started it (no compinit in ~/.zshrc).
  if (( ! $+functions[compdef] )); then
    autoload -Uz compinit && compinit -i
  fi
  compdef _knative_fleet knative-fleet
fi
`;
}

function fishScript(commands: readonly Command[]): string {
  const names = commands.map((c) => c.name).join(" ");
  const lines = [
    "# knative-fleet completion for fish: knative-fleet completion fish | source",
    "complete -c knative-fleet -f",
    ...commands.map(
      (c) =>
        `complete -c knative-fleet -n 'not __fish_seen_subcommand_from ${names}' -a ${c.name} -d ${quote(c.summary)}`,
    ),
    "complete -c knative-fleet -n 'not __fish_seen_subcommand_from " +
      names +
      "' -s v -l version -d 'print the version'",
    ...commands.flatMap((command) => {
      const when = `-n '__fish_seen_subcommand_from ${command.name}'`;
      const flags = flagsOf(command).map((flag) => {
        const short = flag.short ? ` -s ${flag.short}` : "";
        const value = !flag.takesValue
          ? ""
          : flag.values
            ? ` -x -a ${quote(flag.values.join(" "))}`
            : flag.dynamic
              ? ` -x -a ${quote(`(knative-fleet __complete ${flag.dynamic} (commandline -opc))`)}`
              : " -r -F";
        return `complete -c knative-fleet ${when}${short} -l ${flag.long}${value} -d ${quote(flag.description)}`;
      });
      const positional = command.positionals
        ? [`complete -c knative-fleet ${when} -a ${quote(command.positionals.join(" "))}`]
        : command.allowPositionals
          ? [`complete -c knative-fleet ${when} -F`]
          : [];
      return [...flags, ...positional];
    }),
  ];
  return `${lines.join("\n")}\n`;
}
