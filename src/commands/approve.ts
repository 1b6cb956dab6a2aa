import { createHash } from "node:crypto";
import * as fs from "node:fs";
import { lstat, mkdir, readFile, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import git from "isomorphic-git";
import { parse, stringify } from "yaml";
import { ApprovalDocumentSchema, approvalKey } from "../fleet/approval-document.ts";
import { escapeControlCharacters } from "../fleet/diagnostic.ts";
import { pathLooksLikeRollout } from "../fleet/document-kind.ts";
import { Dns1123LabelSchema } from "../fleet/document-schema.ts";
import { decodeFleetFile } from "../fleet/file-text.ts";
import { buildFleetModel, type FleetModel } from "../fleet/model.ts";
import { readFleetDir } from "../fleet/read-dir.ts";
import { APPROVAL_KIND, ROLLOUT_API_VERSION } from "../fleet/rollout-schema.ts";
import { createFileFilter, type FileSelection } from "../fleet/select.ts";
import type { KubeObject } from "../kube/object.ts";
import { ROLLOUT_STATE_CONFIGMAP, rolloutName, rolloutVerdict } from "../rollout/state.ts";
import { type ObjectStore, writeTreeWithChanges } from "../source/tree-edit.ts";
import { commitInMessage } from "../text/commit.ts";
import { commandSettings } from "./access-settings.ts";
import {
  type Command,
  type CommandContext,
  EXIT_ERROR,
  EXIT_FINDINGS,
  EXIT_OK,
  type ParsedArgs,
  UsageError,
} from "./command.ts";
import { HUB_FLAGS_HELP, HUB_OPTIONS, hubClient } from "./hub.ts";
import { hubErrorText } from "./hub-error.ts";
import { rolloutOnHub } from "./status.ts";

// `knative-fleet approve`: writes a KnativeRolloutApproval (docs/approvals.md) as a commit in a local clone
// of the fleet repository, for a person to push or to open a pull request with. It never pushes: the
// approval counts once it is on the tracked branch, where the forge decides who may put it.

const DEFAULT_DIR = "clusters/approvals";
const WHOLE_COMMIT = /^([0-9a-f]{40}|[0-9a-f]{64})$/;
/** A DNS-1123 label's length, the most metadata.name may have. */
const MAX_NAME = 63;

export const approveCommand: Command = {
  name: "approve",
  summary: "Approve a rollout wave: commit a KnativeRolloutApproval in a clone of the fleet repository",
  usage: `Usage: knative-fleet approve --wave W [--commit SHA] [flags]

Writes the approval of wave W of the rollout of a commit (a KnativeRolloutApproval, docs/approvals.md) as
<dir>/<wave>-<commit>.yaml in a clone of the fleet repository and commits it there; it never pushes: push the
commit (git push), or open a pull request so that a second person reviews it. The wave opens once the
approval is on the tracked branch.

The rollout's commit is --commit, or without it the commit of the rollout the hub runs (its state ConfigMap
${ROLLOUT_STATE_CONFIGMAP}, read with --kubeconfig/--context), which must be Progressing. The wave must be
one of the repository's KnativeRollout (read as validate reads the fleet files); a wave that does not
require an approval gets a warning. The file must be among the fleet files the service reads (--config's
file selection, else the default one). An approval of the same commit and wave already there is not
written again.
Exit code 0 when the approval is written or already there; 1 when the repository's rollout policy or the
hub's rollout refuses it (no policy, no such wave, no rollout in progress, a file in the way); 2 on usage
errors (a bad wave name or --dir, a commit not found) or a hub that cannot be read.

Flags:
  --wave W                              the wave to approve (required)
  --commit SHA                          the rollout's commit: whole, or at least 7 hex digits this clone
                                        resolves (default: the hub's rollout's)
  --repo DIR                            the clone of the fleet repository (default: .)
  --dir PATH                            where the file goes, relative to the repository (default:
                                        ${DEFAULT_DIR})
  --by NAME                             who approves: spec.approvedBy and the commit's author (default: git
                                        config user.name)
  --reason TEXT                         why, for people reading the history (spec.reason)
  --no-commit                           write the file only
  --config FILE                         the service's config file: its file selection and namespace
${HUB_FLAGS_HELP}
  -n, --namespace NS                    knative-fleet's namespace on the hub, where the rollout state is
                                        (default: the config's defaultNamespace)
  -h, --help                            show this help`,
  options: {
    wave: { type: "string" },
    commit: { type: "string" },
    repo: { type: "string" },
    dir: { type: "string" },
    by: { type: "string" },
    reason: { type: "string" },
    "no-commit": { type: "boolean" },
    config: { type: "string" },
    ...HUB_OPTIONS,
    namespace: { type: "string", short: "n" },
  },
  allowPositionals: false,
  async run(args, ctx) {
    const options = approveOptions(args);
    try {
      return await approve(options, args, ctx);
    } catch (err) {
      if (!(err instanceof Refusal || err instanceof CannotRun)) throw err;
      ctx.stderr.write(`knative-fleet approve: ${err.message}\n`);
      return err instanceof Refusal ? EXIT_FINDINGS : EXIT_ERROR;
    }
  },
};

/** What the repository's policy or the hub's rollout says against the approval: exit 1. */
class Refusal extends Error {}
/** What keeps the command from looking (the hub cannot be read): exit 2, without the usage hint. */
class CannotRun extends Error {}

interface ApproveOptions {
  wave: string;
  commit?: string;
  repo: string;
  dir: string;
  by?: string;
  reason?: string;
  commitIt: boolean;
  config?: string;
  namespace?: string;
}

function approveOptions({ values }: ParsedArgs): ApproveOptions {
  const text = (name: string) => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const wave = text("wave");
  if (wave === undefined) throw new UsageError("--wave is required: the wave to approve");
  const label = Dns1123LabelSchema.safeParse(wave);
  if (!label.success)
    throw new UsageError(
      `--wave ${JSON.stringify(wave)} is not a wave name: ${label.error.issues[0]?.message ?? "not a DNS-1123 label"}`,
    );
  const optional = (name: string) => (text(name) === undefined ? {} : { [name]: text(name) });
  return {
    wave,
    repo: text("repo") ?? ".",
    dir: text("dir") ?? DEFAULT_DIR,
    commitIt: values["no-commit"] !== true,
    ...optional("commit"),
    ...optional("by"),
    ...(text("reason") && { reason: text("reason") }),
    ...optional("config"),
    ...optional("namespace"),
  };
}

async function approve(options: ApproveOptions, args: ParsedArgs, ctx: CommandContext): Promise<number> {
  const warn = (line: string) => ctx.stderr.write(`knative-fleet approve: warning: ${line}\n`);
  const { settings } = commandSettings(options.config);
  const { selection, defaultNamespace } = settings;
  const root = await repositoryRoot(options.repo);
  const store: ObjectStore = { fs, gitdir: join(root, ".git"), cache: {} };
  const folder = await approvalFolder(root, options.dir);
  const model = buildFleetModel(await readFleetDir(root, selection), { defaultNamespace });
  const required = policyWave(model, options.wave, selection, root);
  if (!required)
    warn(
      `wave ${options.wave} does not require an approval (the policy does not say approval: Required for it): the approval changes nothing`,
    );
  const commit =
    options.commit === undefined
      ? await hubRolloutCommit(args, options.namespace ?? defaultNamespace)
      : await resolveCommitFlag(store, options.commit);
  if (!(await hasObject(store, commit)))
    warn(`commit ${commit} is not in ${root}: fetch it to review the change you approve`);

  const key = approvalKey(commit, options.wave);
  const existing = model.approvals.find((approval) => approvalKey(approval.commit, approval.wave) === key);
  if (existing) {
    const committed = await git.status({ fs, dir: root, filepath: existing.path }).catch(() => "absent");
    const pending = committed === "unmodified" ? "" : " (not committed yet: commit and push it)";
    ctx.stdout.write(
      `Wave ${options.wave} of the ${rolloutName({ commit })} is already approved in ${escapeControlCharacters(existing.path)}${pending}; nothing written.\n`,
    );
    return EXIT_OK;
  }

  const name = approvalName(options.wave, commit);
  const path = `${folder === "" ? "" : `${folder}/`}${fileNameOf(name)}.yaml`;
  selected(path, selection, options.config !== undefined);
  const by = options.by ?? (await gitIdentity(root)).name;
  if (by === undefined && options.commitIt)
    throw new UsageError(
      "no one to approve as: give --by NAME, or set user.name in the git config (git config user.name NAME)",
    );
  const text = approvalText({ name, commit, wave: options.wave, by, reason: options.reason }, path, settings);
  await writeApproval(root, path, text);
  ctx.stdout.write(
    `Wrote ${path}: the approval of wave ${options.wave} of the ${rolloutName({ commit })} (commit ${commit}).\n`,
  );
  if (!options.commitIt) {
    ctx.stdout.write("Not committed (--no-commit): commit it, then push it or open a pull request.\n");
    return EXIT_OK;
  }
  const message = commitMessage(options.wave, commit, options.reason);
  const made = await commitApproval(root, store, path, text, message, by!);
  ctx.stdout.write(
    `Committed ${commitInMessage(made.commit)}${made.branch ? ` on ${made.branch}` : ""}: push it (git push) or open a pull request; the wave opens once it is on the tracked branch.\n`,
  );
  return EXIT_OK;
}

/** The checkout `dir` is in: the folder holding its `.git`. */
async function repositoryRoot(dir: string): Promise<string> {
  const root = await git.findRoot({ fs, filepath: resolve(dir) }).catch(() => undefined);
  if (root === undefined)
    throw new UsageError(
      `${JSON.stringify(dir)} is not in a Git repository (a clone of the fleet repository)`,
    );
  return root;
}

/**
 * --dir as a `/`-separated path inside the repository: refused when it leads out of it (`..`, an absolute
 * path elsewhere), into a hidden folder (.git), or through anything but real folders (a link could lead out).
 */
async function approvalFolder(root: string, dir: string): Promise<string> {
  const inside = relative(root, resolve(root, dir));
  const shown = JSON.stringify(dir);
  if (inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside))
    throw new UsageError(`--dir ${shown} is outside the repository ${root}`);
  const segments = inside.split(sep).filter((segment) => segment !== "");
  if (segments.some((segment) => segment.startsWith(".")))
    throw new UsageError(
      `--dir ${shown} is a hidden folder (such as .git): fleet files are never read there`,
    );
  for (let i = 1; i <= segments.length; i++) {
    const stats = await lstat(join(root, ...segments.slice(0, i))).catch(() => undefined);
    if (stats === undefined) break;
    if (!stats.isDirectory() || stats.isSymbolicLink())
      throw new UsageError(
        `--dir ${shown}: ${segments.slice(0, i).join("/")} is ${stats.isSymbolicLink() ? "a symbolic link" : "not a folder"}; give a folder of the repository`,
      );
  }
  return segments.join("/");
}

/**
 * Whether the repository's one valid KnativeRollout has the wave, and whether the wave requires an approval.
 * No policy, a broken one or no such wave is a refusal: an approval would open nothing.
 */
function policyWave(model: FleetModel, wave: string, selection: FileSelection, root: string): boolean {
  const { policy, failedPaths } = model.rollout;
  if (failedPaths.length > 0)
    throw new Refusal(
      `the rollout policy (${failedPaths.join(", ")}) does not validate, so every change waits until it is fixed (knative-fleet validate ${root} says why); fix it first`,
    );
  if (policy === undefined)
    throw new Refusal(
      `no KnativeRollout among the fleet files of ${root} (${selection.pathGlob}): without a rollout policy no wave waits for an approval`,
    );
  const waves = policy.rollout.spec.waves;
  const found = waves.find((candidate) => candidate.name === wave);
  if (found === undefined)
    throw new Refusal(
      `the rollout policy ${policy.path} has no wave ${wave}; its waves: ${waves.map((w) => w.name).join(", ")}`,
    );
  return found.approval === "Required";
}

/** --commit as a whole commit id: whole already, or a prefix of at least 7 hex digits this clone resolves. */
async function resolveCommitFlag(store: ObjectStore, given: string): Promise<string> {
  const id = given.toLowerCase();
  const shown = JSON.stringify(given);
  if (!/^[0-9a-f]{7,64}$/.test(id))
    throw new UsageError(
      `--commit ${shown} is not a commit id: give the rollout's commit, whole or 7 hex digits at least`,
    );
  if (WHOLE_COMMIT.test(id)) return id;
  let oid: string;
  try {
    oid = await git.expandOid({ ...store, oid: id });
  } catch (err) {
    if ((err as { code?: string }).code === "AmbiguousError")
      throw new UsageError(`--commit ${shown} is ambiguous in this clone: give more digits, or the whole id`);
    throw new UsageError(
      `--commit ${shown}: no commit of that id in ${store.gitdir}; fetch it, or give the whole id`,
    );
  }
  const { type } = await git.readObject({ ...store, oid, format: "content" });
  if (type !== "commit") throw new UsageError(`--commit ${shown} names a ${type}, not a commit`);
  return oid;
}

const hasObject = (store: ObjectStore, oid: string): Promise<boolean> =>
  git.readObject({ ...store, oid, format: "deflated" }).then(
    () => true,
    () => false,
  );

/** The commit of the rollout the hub runs, from its state ConfigMap in knative-fleet's namespace. */
async function hubRolloutCommit(args: ParsedArgs, namespace: string): Promise<string> {
  const hub = hubClient(args);
  const server = hub.rest.server;
  let configMap: KubeObject | undefined;
  try {
    configMap = await hub.get("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP);
  } catch (err) {
    throw new CannotRun(hubErrorText(server, err, "read the rollout state"));
  }
  const picked = commitOfHubRollout(configMap, namespace);
  if ("problem" in picked) throw new Refusal(`on the hub ${server}: ${picked.problem}`);
  return picked.commit;
}

/**
 * The commit an approval names when --commit is not given: that of the rollout in the hub's state ConfigMap
 * (as `status` reads it, without the key), while it is Progressing; else what was found there instead.
 */
export function commitOfHubRollout(
  configMap: KubeObject | undefined,
  namespace: string,
): { commit: string } | { problem: string } {
  const where = `ConfigMap ${namespace}/${ROLLOUT_STATE_CONFIGMAP}`;
  const give = "; give --commit with the rollout's commit to approve it anyway";
  if (configMap === undefined)
    return {
      problem: `no rollout state (no ${where}: no rollout has started, or knative-fleet runs in another namespace than ${namespace}: -n)${give}`,
    };
  const view = rolloutOnHub(configMap, namespace);
  if (view === undefined) return { problem: `the rollout state in ${where} cannot be read${give}` };
  if (view.phase !== "Progressing")
    return {
      problem: `the rollout is ${view.phase}, not Progressing, so no wave waits for an approval: ${rolloutVerdict(view).message}${give}`,
    };
  if (view.commit === undefined || !WHOLE_COMMIT.test(view.commit))
    return {
      problem: `the rollout state in ${where} names the commit ${JSON.stringify(view.commit ?? "")}, not a whole commit id${give}`,
    };
  return { commit: view.commit };
}

/**
 * `<wave>-<commit, 12 digits>`, a DNS-1123 label: a wave too long for it is cut, and a digest of the whole
 * wave name keeps two waves cut to the same beginning apart.
 */
function approvalName(wave: string, commit: string): string {
  const short = commitInMessage(commit);
  const whole = `${wave}-${short}`;
  if (whole.length <= MAX_NAME) return whole;
  const digest = createHash("sha256").update(wave).digest("hex").substring(0, 8);
  const room = MAX_NAME - short.length - digest.length - 2;
  return `${wave.substring(0, room).replace(/-+$/, "")}-${digest}-${short}`;
}

/**
 * The file's name: the approval's, but never with `rollout` in it (a file named so that fails validation is
 * taken for a broken rollout policy, which holds every change). Hex digits and `wave` hold no letter of it.
 */
function fileNameOf(name: string): string {
  const file = name.replace(/rollout/gi, "wave");
  if (pathLooksLikeRollout(file)) throw new Error(`approval file name ${file} looks like a rollout policy's`);
  return file;
}

/** An approval outside the file selection would never count: refused, saying which files count. */
function selected(path: string, selection: FileSelection, configGiven: boolean): void {
  const filter = createFileFilter(selection);
  if (filter.matches(path)) return;
  const status = filter.isStatus(path) ? `, and ${selection.statusDir} is the status bot's folder` : "";
  const config = configGiven
    ? ""
    : " (or --config with the service's config file, whose selection may differ)";
  throw new UsageError(
    `${escapeControlCharacters(path)} is not among the fleet files the service reads (${selection.pathGlob}${status}), so the approval would never count: give a --dir they include${config}`,
  );
}

interface Approval {
  name: string;
  commit: string;
  wave: string;
  by: string | undefined;
  reason: string | undefined;
}

/**
 * The file's text, written by the YAML library (YAML 1.1, as the fleet parser reads it, so `yes` or `on`
 * stays a string); checked with the approval schema before, and read back by the fleet parser after.
 */
function approvalText(approval: Approval, path: string, settings: { defaultNamespace: string }): string {
  const { name, commit, wave, by, reason } = approval;
  const document = {
    apiVersion: ROLLOUT_API_VERSION,
    kind: APPROVAL_KIND,
    metadata: { name },
    spec: {
      commit,
      wave,
      ...(by !== undefined && { approvedBy: by }),
      ...(reason !== undefined && { reason }),
    },
  };
  const namespaced = {
    ...document,
    metadata: { ...document.metadata, namespace: settings.defaultNamespace },
  };
  const checked = ApprovalDocumentSchema.safeParse(namespaced);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    const flag = issue?.path.includes("approvedBy")
      ? "--by"
      : issue?.path.includes("reason")
        ? "--reason"
        : "";
    throw new UsageError(`${flag || issue?.path.join(".")}: ${issue?.message ?? "not a valid approval"}`);
  }
  const text = `# The approval of a rollout wave (docs/approvals.md), written by knative-fleet approve.\n${stringify(document, { version: "1.1", lineWidth: 0 })}`;
  readBack(text, path, approval, settings.defaultNamespace);
  return text;
}

/** The fleet parser reads the text as the same approval, and the YAML library the same reason. */
function readBack(text: string, path: string, approval: Approval, defaultNamespace: string): void {
  const file = decodeFleetFile(path, Buffer.from(text, "utf8"));
  const model = buildFleetModel([file], { defaultNamespace });
  const [read] = model.approvals;
  const spec = (parse(text, { version: "1.1" }) as { spec?: { reason?: unknown } }).spec;
  if (
    model.diagnostics.length > 0 ||
    model.approvals.length !== 1 ||
    approvalKey(read!.commit, read!.wave) !== approvalKey(approval.commit, approval.wave) ||
    read!.approvedBy !== approval.by ||
    spec?.reason !== approval.reason
  )
    throw new Error(`the approval written for ${path} does not read back as itself`);
}

/** Writes the file, never over one that is there (an approval of another wave, or any other file). */
async function writeApproval(root: string, path: string, text: string): Promise<void> {
  const file = join(root, ...path.split("/"));
  await mkdir(join(file, ".."), { recursive: true });
  try {
    await writeFile(file, text, { flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    throw new Refusal(`${path} is already there and is not this approval: remove it, or give another --dir`);
  }
}

/** The commit's message: the subject, then the whole commit id and the reason on one line each. */
function commitMessage(wave: string, commit: string, reason: string | undefined): string {
  const oneLine = (text: string) => text.replace(/[\p{Cc}\p{Zl}\p{Zp}\s]+/gu, " ").trim();
  return [
    `approve wave ${wave} of the ${rolloutName({ commit })}`,
    "",
    `Approves wave ${wave} of the rollout of commit ${commit}.`,
    ...(reason !== undefined && oneLine(reason) !== "" ? [`Reason: ${oneLine(reason)}`] : []),
    "",
  ].join("\n");
}

/**
 * Commits HEAD's tree with the approval added, whatever else is staged (the index is not the commit's
 * source), then stages the file so the checkout agrees with the new HEAD.
 */
async function commitApproval(
  root: string,
  store: ObjectStore,
  path: string,
  text: string,
  message: string,
  name: string,
): Promise<{ commit: string; branch?: string }> {
  const head = await git.resolveRef({ ...store, ref: "HEAD" }).catch(() => undefined);
  const baseTree =
    head === undefined ? undefined : (await git.readCommit({ ...store, oid: head })).commit.tree;
  const tree = await writeTreeWithChanges(store, baseTree, new Map([[path, text]]));
  // The approver is the author; the git config's identity, who made the commit, its committer. Its email
  // is the author's only when the approver is that identity.
  const identity = await gitIdentity(root);
  const email = identity.email ?? "";
  const author = { name, email: identity.name === name ? email : "" };
  const commit = await git.commit({
    ...store,
    dir: root,
    message,
    author,
    committer: identity.name === undefined ? author : { name: identity.name, email },
    tree,
    parent: head === undefined ? [] : [head],
  });
  await git.add({ ...store, dir: root, filepath: path });
  const branch = await git.currentBranch({ ...store, dir: root }).catch(() => undefined);
  return { commit, ...(branch && { branch }) };
}

/**
 * user.name and user.email as git reads them for the repository: its own config, then the user's
 * (~/.gitconfig, then $XDG_CONFIG_HOME/git/config), which isomorphic-git does not read.
 */
async function gitIdentity(root: string): Promise<{ name?: string; email?: string }> {
  const local = async (path: string) => {
    const value: unknown = await git.getConfig({ fs, dir: root, path }).catch(() => undefined);
    return typeof value === "string" && value !== "" ? value : undefined;
  };
  const found = { name: await local("user.name"), email: await local("user.email") };
  // $HOME as this thread sees it (os.homedir() reads the process's, not a worker thread's copy).
  const home = process.env.HOME || homedir();
  const xdg = process.env.XDG_CONFIG_HOME || join(home, ".config");
  for (const file of [join(home, ".gitconfig"), join(xdg, "git", "config")]) {
    if (found.name !== undefined && found.email !== undefined) break;
    const user = userSection(await readFile(file, "utf8").catch(() => ""));
    found.name ??= user.name;
    found.email ??= user.email;
  }
  return {
    ...(found.name !== undefined && { name: found.name }),
    ...(found.email !== undefined && { email: found.email }),
  };
}

/** The `[user]` section's name and email of a git config file's text (plain or quoted values). */
function userSection(text: string): { name?: string; email?: string } {
  const user: { name?: string; email?: string } = {};
  let section = "";
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    const header = /^\[\s*([A-Za-z0-9.-]+)(\s+"[^"]*")?\s*\]/.exec(line);
    if (header) {
      section = header[2] === undefined ? header[1]!.toLowerCase() : "";
      continue;
    }
    const entry = /^(name|email)\s*=\s*(.*)$/i.exec(line);
    if (section !== "user" || entry === null) continue;
    const value = entry[2]!.startsWith('"')
      ? entry[2]!.replace(/^"((?:[^"\\]|\\.)*)".*$/, "$1").replace(/\\(.)/g, "$1")
      : entry[2]!.replace(/\s[#;].*$/, "").trim();
    if (value !== "") user[entry[1]!.toLowerCase() as "name" | "email"] = value;
  }
  return user;
}
