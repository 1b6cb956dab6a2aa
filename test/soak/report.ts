import { cpus, loadavg, totalmem } from "node:os";
import { INVARIANTS, type Invariant, quantile, slopePerHour } from "./checks.ts";
import type { SoakResult } from "./driver.ts";
import { DEFAULT_FAULT_KINDS } from "./faults.ts";
import type { ResourceSample } from "./observer.ts";

// The soak's report in Markdown: the seed and the machine, the invariant counters (all 0 to pass) with each
// violation's step and evidence, what was done (pushes, faults, churn), the convergence times, the resource
// slopes of every replica process, and the log lines at warn and above.

/** Samples before this share of the run (at most 10 minutes) are the warm-up: slopes start after it. */
export const warmUpMs = (durationMs: number) => Math.min(10 * 60_000, durationMs / 6);

export function passed(result: SoakResult): boolean {
  return Object.values(result.counters).every((n) => n === 0);
}

export interface ProcessFigures {
  process: string;
  minutes: number;
  samples: number;
  rss: { start: number; peak: number; end: number; slope: number };
  heapSlope: number;
  peaks: Record<"fds" | "sockets" | "timers" | "handles" | "hubConnections", number>;
  slopes: Record<"fds" | "sockets" | "timers" | "hubConnections", number>;
}

/**
 * Per replica process: RSS from start to end, and the slopes per hour of everything after the warm-up (the
 * first minutes, and the warm-up pushes if they took longer).
 */
export function processFigures(result: SoakResult): ProcessFigures[] {
  const from = Math.max(result.startedAt + warmUpMs(result.options.durationMs), result.warmUpEndedAt ?? 0);
  return [...result.resources].map(([process, samples]) => {
    const late = samples.filter((s) => s.at >= from);
    const slope = (pick: (s: ResourceSample) => number) =>
      slopePerHour(late.map((s) => ({ at: s.at, value: pick(s) })));
    const max = (pick: (s: ResourceSample) => number) => Math.max(...samples.map(pick));
    return {
      process,
      minutes: (samples.at(-1)!.at - samples[0]!.at) / 60_000,
      samples: late.length,
      rss: {
        start: samples[0]!.rssMiB,
        peak: max((s) => s.rssMiB),
        end: samples.at(-1)!.rssMiB,
        slope: slope((s) => s.rssMiB),
      },
      heapSlope: slope((s) => s.heapUsedMiB),
      peaks: {
        fds: max((s) => s.fds),
        sockets: max((s) => s.sockets),
        timers: max((s) => s.timers),
        handles: max((s) => s.handles),
        hubConnections: max((s) => s.hubConnections),
      },
      slopes: {
        fds: slope((s) => s.fds),
        sockets: slope((s) => s.sockets),
        timers: slope((s) => s.timers),
        hubConnections: slope((s) => s.hubConnections),
      },
    };
  });
}

const f1 = (n: number | undefined) => (n === undefined ? "–" : n.toFixed(1));
const stats = (values: number[]) =>
  values.length === 0
    ? "–"
    : `p50 ${f1(quantile(values, 0.5))} s, p99 ${f1(quantile(values, 0.99))} s, max ${f1(Math.max(...values))} s (n = ${values.length})`;

export function renderReport(result: SoakResult): string {
  const at = (t: number) => {
    const s = Math.round((t - result.startedAt) / 1000);
    return `+${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
  };
  const minutes = (result.endedAt - result.startedAt) / 60_000;
  const out: string[] = [];
  const total = Object.values(result.counters).reduce((a, b) => a + b, 0);
  out.push(
    `# knative-fleet soak: ${passed(result) ? "PASS" : `FAIL (${total} violations)`}`,
    "",
    `- Seed **${result.options.seed}** (\`--seed ${result.options.seed}\` replays the same choices), rounds started for ${result.options.durationMs / 60_000} min${result.endedEarlyAfterRound === undefined ? "" : ` (**ended early** by an interrupt after round ${result.endedEarlyAfterRound})`}, ${minutes.toFixed(1)} min in all, from ${new Date(result.startedAt).toISOString()}.`,
    `- Machine: ${cpus().length} × ${cpus()[0]?.model.trim() ?? "?"}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")} at the end; Node ${process.versions.node}.`,
    `- Sandbox: hub + ${result.options.spokes} spokes used; knative-fleet as \`${result.options.runtime}\`.`,
    ...result.fleets.map(
      (f) =>
        `- Fleet \`${f.repo}\` (${f.mode === "leader" ? "leader election" : "sharding"}): replicas ${f.replicas.join(", ")}; spokes ${f.spokes.join(", ")}.`,
    ),
    `- Pace: rounds of ${result.options.roundMs / 1000} s, a push to each fleet every ${result.options.pushEverySeconds.join("-")} s, a fault every ${result.options.faultEverySeconds.join("-")} s (at most ${result.options.maxFaults} at once; ${result.options.faultKinds.join() === DEFAULT_FAULT_KINDS.join() ? "the default kinds" : `only ${result.options.faultKinds.join(", ")}`}), churn every ${result.options.churnEverySeconds.join("-")} s; convergence bound ${result.options.convergeBoundMs / 1000} s.${result.warmUpEndedAt === undefined ? "" : ` Before the rounds, a warm-up walked Serving and Eventing through every minor of the window on every ring (${((result.warmUpEndedAt - result.startedAt) / 60_000).toFixed(1)} min).`}`,
    "",
    "## Invariants",
    "",
    "| invariant | what it checks | violations |",
    "|---|---|---|",
    ...Object.entries(INVARIANTS).map(
      ([name, meaning]) => `| \`${name}\` | ${meaning} | ${result.counters[name as Invariant]} |`,
    ),
    "",
    `Checked: ${result.checks.hubEvents} hub CR events, ${result.checks.waveChecks} wave checks (${result.checks.waveChecksSkipped} skipped: policy changed within 30 s or broken), ${result.checks.ownershipSamples} ownership samples, ${result.checks.spokeSamples} spoke reads; ${result.checks.prunesConfirmed} prunes held for a person's confirmation, confirmed.`,
    "",
  );
  if (result.violations.length > 0) {
    out.push("### Violations", "");
    for (const v of result.violations.slice(0, 100))
      out.push(`- **${v.invariant}** at ${at(v.at)}, during ${v.step}: ${v.evidence}`);
    if (result.violations.length > 100) out.push(`- … and ${result.violations.length - 100} more`);
    out.push("");
  }

  const tally = <T>(items: readonly T[], key: (t: T) => string) => {
    const counts = new Map<string, number>();
    for (const item of items) counts.set(key(item), (counts.get(key(item)) ?? 0) + 1);
    return [...counts].sort((a, b) => b[1] - a[1]);
  };
  out.push(
    "## What was done",
    "",
    `**${result.pushes.length} pushes**, **${result.faults.length} faults**, **${result.churn.length} ClusterProfile changes**.`,
    "",
    "| pushes by kind | n |",
    "|---|---|",
    ...tally(result.pushes, (p) => p.kind).map(([k, n]) => `| ${k} | ${n} |`),
    "",
    "| faults by kind | n | seconds in all |",
    "|---|---|---|",
    ...tally(result.faults, (f) => f.kind).map(
      ([k, n]) =>
        `| ${k} | ${n} | ${result.faults
          .filter((f) => f.kind === k)
          .reduce((s, f) => s + ((f.endedAt ?? result.endedAt) - f.startedAt) / 1000, 0)
          .toFixed(0)} |`,
    ),
    "",
    "| ClusterProfile churn | n |",
    "|---|---|",
    ...tally(result.churn, (c) => c.kind).map(([k, n]) => `| ${k} | ${n} |`),
    "",
    `Replica processes ended: ${result.replicaExits.filter((e) => e.killedByFault).length} killed by the soak, ${result.replicaExits.filter((e) => !e.killedByFault).length} by themselves${
      result.replicaExits.some((e) => !e.killedByFault)
        ? ` (${tally(
            result.replicaExits.filter((e) => !e.killedByFault),
            (e) => e.exit,
          )
            .map(([k, n]) => `${n}× ${k}`)
            .join(", ")})`
        : ""
    }; the soak restarted each. Credential plugin runs: ${result.pluginRuns.total}, ${result.pluginRuns.delayed} of them slowed.`,
    "",
    "## Convergence",
    "",
    `- First install of both fleets: ${f1(result.initialInstallSeconds)} s.`,
    `- Push → every cluster converged on it: ${stats(result.pushes.flatMap((p) => p.readySeconds ?? []))}; ${result.pushes.filter((p) => p.readySeconds === undefined).length} pushes were superseded by a newer push (or a fault) before their fleet converged.`,
    `- Faults stopped → converged, per round: ${stats(result.convergence.flatMap((c) => c.afterSeconds ?? []))}; ${result.convergence.filter((c) => c.afterSeconds === undefined).length} of ${result.convergence.length} rounds missed the bound.`,
    `- Deleted CR → finalized: ${stats(result.finalized.map((f) => f.seconds))}; ${result.finalized.filter((f) => f.withoutCleanup).length} released without cleanup because their ClusterProfile was gone (by design; the spoke keeps the install).`,
    "",
  );

  const figures = processFigures(result);
  out.push(
    "## Resources",
    "",
    `Sampled every 15 s from each replica's /proc and /metrics; slopes per hour by least squares over the samples after the first ${(warmUpMs(result.options.durationMs) / 60_000).toFixed(0)} minutes.`,
    "",
    "| process | lived (min) | RSS start / peak / end (MiB) | RSS slope (MiB/h) | heap slope (MiB/h) | fds peak (slope/h) | sockets peak (slope/h) | timers peak (slope/h) | hub connections peak (slope/h) |",
    "|---|---|---|---|---|---|---|---|---|",
    ...figures.map(
      (p) =>
        `| ${p.process} | ${p.minutes.toFixed(0)} | ${p.rss.start.toFixed(0)} / ${p.rss.peak.toFixed(0)} / ${p.rss.end.toFixed(0)} | ${p.rss.slope.toFixed(1)} | ${p.heapSlope.toFixed(1)} | ${p.peaks.fds} (${p.slopes.fds.toFixed(1)}) | ${p.peaks.sockets} (${p.slopes.sockets.toFixed(1)}) | ${p.peaks.timers} (${p.slopes.timers.toFixed(1)}) | ${p.peaks.hubConnections} (${p.slopes.hubConnections.toFixed(1)}) |`,
    ),
    "",
    `Watches open on the spokes (all replicas, through the proxy): ${result.spokeWatches.length === 0 ? "–" : `${Math.min(...result.spokeWatches.map((w) => w.open))} to ${Math.max(...result.spokeWatches.map((w) => w.open))}, slope ${slopePerHour(result.spokeWatches.filter((w) => w.at >= result.startedAt + warmUpMs(result.options.durationMs)).map((w) => ({ at: w.at, value: w.open }))).toFixed(1)}/h`}.`,
    "",
    "## Log lines at warn and above",
    "",
    "Grouped by message (numbers and ids blanked); every error line is judged by `judgeLogLine` (test/soak/checks.ts).",
    "",
    "| level | n | message |",
    "|---|---|---|",
    ...result.logSummary
      .slice(0, 40)
      .map(
        (l) => `| ${l.level >= 50 ? "error" : "warn"} | ${l.count} | ${l.summary.replaceAll("|", "\\|")} |`,
      ),
    "",
    "## Faults in order",
    "",
    ...result.faults.map(
      (f) =>
        `- ${at(f.startedAt)} ${f.kind} ${f.target}: ${f.detail.trim()} (${f.endedAt ? `${((f.endedAt - f.startedAt) / 1000).toFixed(0)} s` : "not ended"})`,
    ),
    "",
  );
  return out.join("\n");
}
