import { execFile, execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completeFromProcess, completionValues } from "../../../src/commands/complete.ts";
import { completionScript } from "../../../src/commands/completion.ts";
import { commands } from "../../../src/commands/main.ts";
import { installCliShims } from "../../support/ci-steps.ts";

// What completes the values of --context (the kubeconfig's contexts), -n/--namespace (the hub's namespaces,
// nothing when it does not answer in time) and --base/--head (the repository's branches and tags): never
// file names. Asked of `knative-fleet __complete` by each shell's script, run here in the real bash, zsh and
// fish with this checkout's CLI on the PATH; zsh's script without compinit run first.

let work = "";
let bin = "";
let kubeconfig = "";
let silentKubeconfig = "";
let repo = "";
let api: Server;
let silent: Server;

const kubeconfigFor = (contexts: [string, string][], current: string) =>
  JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: contexts.map(([name, server]) => ({ name, cluster: { server } })),
    users: [{ name: "u", user: { token: "t" } }],
    contexts: contexts.map(([name]) => ({ name, context: { cluster: name, user: "u" } })),
    "current-context": current,
  });

const git = (...args: string[]) => execFileSync("git", args, { cwd: repo, encoding: "utf8" });

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "knative-fleet-complete-"));
  bin = join(work, "bin");
  await mkdir(bin);
  await installCliShims(bin);
  api = createServer((request, response) => {
    response.setHeader("content-type", "application/json");
    if (request.url?.startsWith("/api/v1/namespaces"))
      return response.end(
        JSON.stringify({
          items: ["default", "fleet-system", "knative-fleet"].map((name) => ({ metadata: { name } })),
        }),
      );
    response.statusCode = 404;
    response.end("{}");
  });
  silent = createServer(() => {}); // accepts, never answers
  await new Promise<void>((up) => api.listen(0, "127.0.0.1", up));
  await new Promise<void>((up) => silent.listen(0, "127.0.0.1", up));
  const url = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  kubeconfig = join(work, "kubeconfig");
  await writeFile(
    kubeconfig,
    kubeconfigFor(
      [
        ["hub", url(api)],
        ["staging-hub", url(api)],
      ],
      "hub",
    ),
  );
  silentKubeconfig = join(work, "silent-kubeconfig");
  await writeFile(silentKubeconfig, kubeconfigFor([["hub", url(silent)]], "hub"));
  repo = join(work, "fleet");
  await mkdir(repo);
  git("init", "-q", "-b", "main");
  git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one");
  git("branch", "feature/canary");
  git("tag", "v1.0.0");
  git("remote", "add", "origin", "https://git.example/fleet.git");
  git("update-ref", "refs/remotes/origin/main", "HEAD");
});

afterAll(async () => {
  api?.close();
  silent?.closeAllConnections();
  silent?.close();
  await rm(work, { recursive: true, force: true });
});

describe("the values completed for --context, -n and --base/--head", { timeout: 30_000 }, () => {
  it("--context: the contexts of --kubeconfig, else of $KUBECONFIG", async () => {
    expect(
      await completionValues("contexts", [
        "knative-fleet",
        "status",
        "--kubeconfig",
        kubeconfig,
        "--context",
      ]),
    ).toEqual(["hub", "staging-hub"]);
    expect(await completionValues("contexts", [`--kubeconfig=${join(work, "missing")}`])).toEqual([]);
  });

  it("-n: the namespaces of the hub of --context; nothing, quickly, from a hub that does not answer", async () => {
    const words = ["knative-fleet", "status", "--kubeconfig", kubeconfig, "--context", "staging-hub", "-n"];
    expect(await completionValues("namespaces", words)).toEqual(["default", "fleet-system", "knative-fleet"]);
    const started = Date.now();
    expect(await completionValues("namespaces", ["--kubeconfig", silentKubeconfig], 300)).toEqual([]);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("--base/--head: HEAD, the branches, the remote-tracking branches and the tags of --repo, else of the working directory", async () => {
    const refs = ["HEAD", "feature/canary", "main", "origin/main", "v1.0.0"];
    expect(await completionValues("refs", ["plan", "--repo", repo, "--base"])).toEqual(refs);
    // Without --repo, the working directory's: the entry run there, as a shell runs it (no process.chdir
    // in a test: workers, as the mutation runner's, cannot).
    const fromRepo = await new Promise<string>((done, fail) =>
      execFile(
        join(bin, "knative-fleet"),
        ["__complete", "refs", "plan", "--head"],
        { cwd: repo },
        (error, stdout) => (error ? fail(error) : done(stdout)),
      ),
    );
    expect(fromRepo.trim().split("\n")).toEqual(refs);
    expect(await completionValues("refs", ["plan", "--repo", work])).toEqual([]);
  });

  it("the entry answers `__complete` with one value a line and exits", async () => {
    expect(typeof completeFromProcess).toBe("function");
    const out = await new Promise<string>((done, fail) =>
      execFile(
        join(bin, "knative-fleet"),
        ["__complete", "contexts", "--kubeconfig", kubeconfig],
        (error, stdout) => (error ? fail(error) : done(stdout)),
      ),
    );
    expect(out).toBe("hub\nstaging-hub\n");
  });
});

describe("each shell's script completes them, never with file names", { timeout: 60_000 }, () => {
  const dir = () => work;
  const script = async (shell: "bash" | "zsh" | "fish") => {
    const file = join(dir(), `completion.${shell}`);
    await writeFile(file, completionScript(shell, commands));
    return file;
  };
  const env = () => ({
    PATH: `${bin}:${process.env.PATH}`,
    HOME: work,
    ZDOTDIR: work,
    KUBECONFIG: kubeconfig,
  });
  // Not execFileSync: the fake hub answers from this process, whose event loop must keep running.
  const run = (shell: string, args: string[], cwd = work) =>
    new Promise<string>((done, fail) =>
      execFile(shell, args, { encoding: "utf8", env: env(), cwd }, (error, stdout, stderr) =>
        error ? fail(new Error(`${error.message}\n${stderr}`)) : done(stdout),
      ),
    );

  it("bash", async () => {
    const file = await script("bash");
    const complete = async (...words: string[]) =>
      (
        await run("bash", [
          "-c",
          `source ${file}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _knative_fleet; echo "\${COMPREPLY[@]}"`,
        ])
      ).trim();
    expect(await complete("knative-fleet", "status", "--context", "")).toBe("hub staging-hub");
    expect(await complete("knative-fleet", "clusters", "--context", "st")).toBe("staging-hub");
    expect(await complete("knative-fleet", "status", "-n", "f")).toBe("fleet-system");
    expect(await complete("knative-fleet", "approve", "--namespace", "kn")).toBe("knative-fleet");
    expect(await complete("knative-fleet", "plan", "--repo", repo, "--base", "fe")).toBe("feature/canary");
    expect(await complete("knative-fleet", "plan", "--repo", repo, "--head", "v")).toBe("v1.0.0");
    // An unreachable hub: nothing, and bash's file-name fallback is switched off for the flag.
    expect(completionScript("bash", commands)).toMatch(
      /-n\|--namespace\) compopt \+o default 2>\/dev\/null; words=/,
    );
  });

  it("zsh, sourced without compinit: it starts the completion system itself and registers", async () => {
    const file = await script("zsh");
    expect(
      (await run("zsh", ["-f", "-c", `source ${file}; print -r -- $_comps[knative-fleet]`])).trim(),
    ).toBe("_knative_fleet");
    // The values helper, with compadd standing in: what it would offer.
    const offered = async (words: string, kind: string) =>
      (
        await run("zsh", [
          "-f",
          "-c",
          `source ${file}; compadd() { print -rl -- "\${(@P)2}" }; words=(${words}); _knative_fleet_program=knative-fleet; _knative_fleet_values ${kind}`,
        ])
      ).trim();
    expect(await offered("status --context ''", "contexts")).toBe("hub\nstaging-hub");
    expect(await offered(`plan --repo ${repo} --base ''`, "refs")).toBe(
      "HEAD\nfeature/canary\nmain\norigin/main\nv1.0.0",
    );
    // What _arguments gets: --context and -n name the helper, not _files; descriptions whole.
    const specs = (
      await run("zsh", [
        "-f",
        "-c",
        `compdef() {}; source ${file}; _arguments() { print -rl -- "$@" }; words=(knative-fleet validate ''); CURRENT=3; _knative_fleet; words=(knative-fleet status ''); CURRENT=3; _knative_fleet`,
      ])
    ).split("\n");
    expect(specs).toContain(
      "--config[the service's config file\\: its file selection, default namespace and admission]:config:_files",
    );
    expect(specs).toContain(
      "--context[the kubeconfig context of the hub (default\\: the current context)]:context:_knative_fleet_values contexts",
    );
    expect(specs.find((spec) => spec.includes("--namespace"))).toMatch(
      /:namespace:_knative_fleet_values namespaces$/,
    );
  });

  it("fish", async () => {
    const file = await script("fish");
    const complete = async (line: string) =>
      (await run("fish", ["-c", `source ${file}; complete -C '${line}'`]))
        .trim()
        .split("\n")
        .map((l) => l.split("\t")[0]);
    expect(await complete("knative-fleet status --context ")).toEqual(["hub", "staging-hub"]);
    expect(await complete(`knative-fleet plan --repo ${repo} --base f`)).toEqual(["feature/canary"]);
  });
});
