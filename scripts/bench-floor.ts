// The memory a knative-fleet process holds before it does any work, step by step (issue #44 compares the
// service's peak with the upstream operator's): each step a fresh Node process with the image's flags and
// environment (read from the Dockerfile), its resident memory after a second of quiet, split into pages
// backed by files (nearly all the node binary's: V8, OpenSSL, ICU's data) and the rest. Medians of --runs.
// Usage: npm run build && node scripts/bench-floor.ts [--runs 5]
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { builtCli, imageRuntime } from "../test/support/dockerfile.ts";
import { repoRoot } from "../test/support/shared.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error("--runs takes a whole number of at least 1");

const cli = builtCli();
const commands = pathToFileURL(join(repoRoot, "dist", "commands", "main.js")).href;
const { nodeArgs, env } = imageRuntime(mkdtempSync(join(tmpdir(), "bench-floor-")), cli);

/** Each step's module code; it ends by printing its own memory once quiet. */
const STEPS: { name: string; code: string }[] = [
  { name: "Node, nothing loaded", code: "" },
  {
    // node-cron computes every next run through Intl.DateTimeFormat (formatToParts), with or without a
    // timezone; this is that formatter alone.
    name: "+ one Intl.DateTimeFormat used (node-cron's every tick)",
    code: `new Intl.DateTimeFormat("en-US", { hour: "2-digit", hour12: false }).formatToParts(new Date());`,
  },
  { name: "the CLI's modules loaded (all commands)", code: `await import(${JSON.stringify(commands)});` },
  {
    name: "+ a node-cron schedule that fired (the Git poll's)",
    code: `await import(${JSON.stringify(commands)});
      const { schedule } = await import("node-cron");
      await new Promise((fired) => { const task = schedule("* * * * * *", () => { task.destroy(); fired(); }); });`,
  },
];

const REPORT = `
  await new Promise((quiet) => setTimeout(quiet, 1000));
  const status = (await import("node:fs")).readFileSync("/proc/self/status", "utf8");
  const kib = (field) => Number(new RegExp("^" + field + ":\\\\s+(\\\\d+)", "m").exec(status)[1]);
  console.log(JSON.stringify({ rss: kib("VmRSS"), file: kib("RssFile") }));`;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (kib: number) => (kib / 1024).toFixed(1).padStart(6);

console.log(`resident memory in MiB, medians of ${runs} processes (node ${nodeArgs.join(" ")})`);
console.log(`${"step".padEnd(58)} ${"RSS".padStart(6)} ${"file".padStart(6)} ${"other".padStart(6)}`);
for (const step of STEPS) {
  const samples = Array.from({ length: runs }, () => {
    const out = execFileSync(
      process.execPath,
      [...nodeArgs, "--input-type=module", "-e", `${step.code}\n${REPORT}`],
      { cwd: repoRoot, env: { ...process.env, ...env }, encoding: "utf8" },
    );
    return JSON.parse(out.trim().split("\n").at(-1)!) as { rss: number; file: number };
  });
  const rss = median(samples.map((s) => s.rss));
  const file = median(samples.map((s) => s.file));
  console.log(`${step.name.padEnd(58)} ${mib(rss)} ${mib(file)} ${mib(rss - file)}`);
}
