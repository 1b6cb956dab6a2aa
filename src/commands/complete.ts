import * as fs from "node:fs";
import { resolve } from "node:path";
import git from "isomorphic-git";
import { clientFromKubeConfig, KubeConfig, loadKubeConfig } from "../kube/kubeconfig.ts";

// `knative-fleet __complete <kind> [words...]`: the values the completion scripts (completion.ts) offer for
// a flag whose values are not files, one a line; `words` is the command line typed so far, so that
// --kubeconfig, --context and --repo there are followed. Never an error: nothing to offer prints nothing.
// src/cli.ts loads this module alone (not the commands), so that a Tab costs a Node start and little more.

/** What a flag's values are, by the flag's long name. */
export const DYNAMIC_VALUES = {
  context: "contexts",
  namespace: "namespaces",
  base: "refs",
  head: "refs",
} as const;
type Kind = (typeof DYNAMIC_VALUES)[keyof typeof DYNAMIC_VALUES];

/** How long the hub may take to list its namespaces before a Tab gives up and offers nothing. */
const NAMESPACE_TIMEOUT_MS = 1500;

/** The value of `--name VALUE` or `--name=VALUE` among the words typed (the last one given). */
function flagValue(words: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  words.forEach((word, index) => {
    if (word === `--${name}` && index + 1 < words.length) value = words[index + 1];
    else if (word.startsWith(`--${name}=`)) value = word.slice(name.length + 3);
  });
  return value === "" ? undefined : value;
}

/** The contexts of the kubeconfig --kubeconfig names, else of $KUBECONFIG / ~/.kube/config. */
function contexts(words: readonly string[]): string[] {
  const kc = new KubeConfig();
  const file = flagValue(words, "kubeconfig");
  if (file) kc.loadFromFile(file);
  else kc.loadFromDefault();
  return kc.contexts.map((context) => context.name);
}

/** The hub's namespaces (of --context, else the current context), or nothing when it does not answer soon. */
async function namespaces(words: readonly string[], timeoutMs: number): Promise<string[]> {
  const kc = loadKubeConfig(flagValue(words, "kubeconfig"), flagValue(words, "context"));
  const client = clientFromKubeConfig(kc);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("the hub did not answer in time")), timeoutMs);
  });
  try {
    const list = client.rest.request<{ items: { metadata: { name: string } }[] }>({
      method: "GET",
      path: "/api/v1/namespaces",
    });
    const { body } = await Promise.race([list, late]);
    return body.items.map((item) => item.metadata.name);
  } finally {
    clearTimeout(timer);
  }
}

/** The branches (local and remote-tracking, as `origin/main`) and tags of --repo, else of the working directory's repository. */
async function refs(words: readonly string[]): Promise<string[]> {
  const dir = await git.findRoot({ fs, filepath: resolve(flagValue(words, "repo") ?? ".") });
  const remotes = await git.listRemotes({ fs, dir });
  const remoteBranches = await Promise.all(
    remotes.map(async ({ remote }) =>
      (await git.listBranches({ fs, dir, remote }))
        .filter((branch) => branch !== "HEAD")
        .map((branch) => `${remote}/${branch}`),
    ),
  );
  return [
    "HEAD",
    ...(await git.listBranches({ fs, dir })),
    ...remoteBranches.flat(),
    ...(await git.listTags({ fs, dir })),
  ];
}

/** The values of `kind` for the command line `words`; [] when there are none or they cannot be read. */
export async function completionValues(
  kind: string,
  words: readonly string[],
  timeoutMs = NAMESPACE_TIMEOUT_MS,
): Promise<string[]> {
  try {
    switch (kind as Kind) {
      case "contexts":
        return contexts(words);
      case "namespaces":
        return await namespaces(words, timeoutMs);
      case "refs":
        return await refs(words);
      default:
        return [];
    }
  } catch {
    return [];
  }
}

/** `knative-fleet __complete KIND WORDS...` as the process runs it: the values, then exit at once. */
export async function completeFromProcess(): Promise<void> {
  const [kind = "", ...words] = process.argv.slice(3);
  const values = await completionValues(kind, words);
  process.stdout.write(values.map((value) => `${value}\n`).join(""), () => process.exit(0));
}
