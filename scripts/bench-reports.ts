// The status files and the plan comment of a big fleet: their sizes against the Git hosts' limits, and the
// time to render them, for growing fleets (clusters, two CRs each: a Serving and an Eventing placement).
// The fleets are realistic in shape: most CRs Ready, some failing with long reasons, some in progress,
// some drifted, a rollout in its second wave with the later waves waiting; the plan upgrades every CR
// (objects from a real plan of the real releases, copied per CR), with a few joins, departures, findings
// and errors. The unit tests (test/unit/status/big-fleet.test.ts, test/unit/plan/big-fleet.test.ts)
// check the sizes and the structure of the same fleets; this script prints the times.
// With --pipeline, the two steps of the plan's pipeline that were quadratic (issue #44): the joins and
// departures of one placement of N clusters (placement/plan.ts planPlacements: three join, two leave), and
// the upgrade chain of each of N CRs all on one chain (plan/plan.ts withChain): the median time and the
// time per cluster or CR, which stays flat as N doubles (it doubled with the quadratic lookups).
// The status renders alternate between fleets that differ in every CR, or in 1% of them (fleet.yaml
// reuses the rows a render already wrote).
// Usage: node scripts/bench-reports.ts [clusters=250,500,1000,2000] [runs=5]
//        node scripts/bench-reports.ts --pipeline [size=1000,2000,4000,8000] [runs=5]
import type { KubeObject } from "../src/kube/object.ts";
import { planPlacements } from "../src/placement/plan.ts";
import { renderMarkdown } from "../src/plan/index.ts";
import { chainsOf, withChain } from "../src/plan/plan.ts";
import { renderStatusSummary } from "../src/status/summary.ts";
import { bigFleetPlan, bigFleetStatus, bigPlacement, chainedCrs } from "../test/support/big-fleet.ts";

if (import.meta.main) {
  const pipeline = process.argv[2] === "--pipeline";
  const args = pipeline ? process.argv.slice(3) : process.argv.slice(2);
  const sizes = (args[0] ?? (pipeline ? "1000,2000,4000,8000" : "250,500,1000,2000")).split(",").map(Number);
  const runs = Number(args[1] ?? 5);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const timed = <T>(work: () => T): { value: T; ms: number } => {
    const times: number[] = [];
    let value!: T;
    for (let run = 0; run < runs; run++) {
      const started = performance.now();
      value = work();
      times.push(performance.now() - started);
    }
    return { value, ms: median(times) };
  };
  const kb = (text: string) => `${(Buffer.byteLength(text) / 1024).toFixed(0)} KiB`;
  const previous: Record<string, number> = {};
  const growth = (label: string, ms: number) => {
    const before = previous[label];
    previous[label] = ms;
    return before === undefined ? "" : ` (x${(ms / before).toFixed(2)} for x2)`;
  };
  // A few milliseconds each once linear: each sample repeats the step over 16,000 clusters or CRs in all
  // (a GC pause or the JIT then weighs on one sample less), and the time is one step's.
  const perStep = <T>(size: number, work: () => T) => {
    const repeats = Math.max(1, Math.round(16_000 / size));
    const { value, ms } = timed(() => {
      let last!: T;
      for (let i = 0; i < repeats; i++) last = work();
      return last;
    });
    const step = ms / repeats;
    return { value, text: `median ${step.toFixed(1)} ms, ${((step * 1e6) / size).toFixed(0)} ns each` };
  };
  for (const size of pipeline ? sizes : []) {
    const { before, after } = bigPlacement(size);
    const placements = perStep(size, () => planPlacements(before, after, "snapshot"));
    const { added, removed } = placements.value.placements[0]!;
    console.log(
      `planPlacements, one placement of ${size} clusters (${added.length} join, ${removed.length} leave): ` +
        placements.text,
    );
    const { plans, upgrades } = chainedCrs(size);
    const chained = perStep(size, () => {
      const chains = chainsOf(upgrades);
      return plans.map((plan) => withChain(plan, chains));
    });
    console.log(
      `withChain, ${size} CRs on a chain (${chained.value.filter((plan) => plan.chain).length} chained): ` +
        chained.text,
    );
  }
  for (const clusters of pipeline ? [] : sizes) {
    const input = bigFleetStatus(clusters);
    // Renders alternate between two fleets: one whose every CR differs (nothing of the last render's
    // rows is reused), and one with every hundredth CR changed (a write-back after a few CRs moved on).
    const alternating = (every: number) => {
      const other = withVersionsChanged(input, every);
      let flip = false;
      return timed(() => {
        flip = !flip;
        return renderStatusSummary(flip ? input : other);
      });
    };
    const status = alternating(1);
    const again = alternating(100);
    const files = status.value;
    const readme = files.find((f) => f.name === "README.md")!.content;
    const others = files.filter((f) => f.name !== "README.md");
    console.log(
      `status, ${clusters} clusters (${input.resources.length} CRs): ${files.length} files, README.md ${kb(readme)}, ` +
        others
          .map((f) => `${f.name} ${kb(f.content)}`)
          .slice(0, 3)
          .join(", ") +
        (others.length > 3 ? `, ... (${kb(others.map((f) => f.content).join(""))} in all)` : "") +
        `; render median ${status.ms.toFixed(0)} ms${growth("status", status.ms)}, ` +
        `${again.ms.toFixed(0)} ms after 1% of the CRs changed${growth("status again", again.ms)}`,
    );
    const plan = await bigFleetPlan(clusters);
    const comment = timed(() => renderMarkdown(plan));
    const whole = renderMarkdown(plan, Number.POSITIVE_INFINITY);
    console.log(
      `plan, ${clusters} clusters (${plan.changes} CRs): comment ${comment.value.length.toLocaleString("en-US")} ` +
        `characters (${kb(comment.value)}), whole ${whole.length.toLocaleString("en-US")}; render median ` +
        `${comment.ms.toFixed(0)} ms${growth("plan", comment.ms)}`,
    );
  }
}

/** The fleet with every `every`-th CR's installed version changed: its row differs, the others do not. */
function withVersionsChanged<T extends { resources: readonly KubeObject[] }>(input: T, every: number): T {
  return {
    ...input,
    resources: input.resources.map((cr, i) =>
      i % every === 0
        ? {
            ...cr,
            status: {
              ...(cr.status as object),
              version: `${(cr.status as { version?: string })?.version}-next`,
            },
          }
        : cr,
    ),
  };
}
