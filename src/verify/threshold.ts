import type { ThresholdOp } from "../fleet/rollout-schema.ts";

// A Prometheus result against a gate's threshold. Values are Prometheus' sample strings ("0.31", "NaN",
// "+Inf"); NaN (a ratio over no traffic: 0/0) is no data, not a number that compares false, or true for !=.

interface Threshold {
  op: ThresholdOp;
  value: number;
}

/** One sample of an instant query's result: the series' labels (none for a scalar) and its value. */
export interface Sample {
  labels: Readonly<Record<string, string>>;
  value: number;
}

/** A Prometheus sample value: a decimal, "NaN", "+Inf" or "-Inf" (Go's strconv.FormatFloat). */
export function sampleValue(text: string): number {
  if (text === "+Inf" || text === "Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  return text.trim() === "" ? Number.NaN : Number(text);
}

/** Whether `value op threshold` holds. */
export function meets(value: number, { op, value: limit }: Threshold): boolean {
  switch (op) {
    case "<":
      return value < limit;
    case "<=":
      return value <= limit;
    case ">":
      return value > limit;
    case ">=":
      return value >= limit;
    case "==":
      return value === limit;
    case "!=":
      return value !== limit;
  }
}

interface Verdict {
  /** undefined: no data (no sample, or only NaN). */
  passed: boolean | undefined;
  /** What the result was, for the gate's detail: "0.31", or "0.31 for {code="500"} (1 of 3 series)". */
  observed: string;
}

const seriesText = (labels: Readonly<Record<string, string>>): string =>
  `{${Object.entries(labels)
    .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
    .join(",")}}`;

/** The result against the threshold: every series must meet it; the first that does not is named. */
export function judge(samples: readonly Sample[], threshold: Threshold): Verdict {
  const numbers = samples.filter((s) => !Number.isNaN(s.value));
  if (numbers.length === 0) {
    return { passed: undefined, observed: samples.length === 0 ? "no data" : "NaN (no data)" };
  }
  const failing = numbers.filter((s) => !meets(s.value, threshold));
  const shown = failing[0] ?? closest(numbers, threshold);
  if (numbers.length === 1) return { passed: failing.length === 0, observed: String(shown.value) };
  const tally =
    failing.length === 0
      ? `the closest of ${numbers.length} series`
      : `${failing.length} of ${numbers.length} series fail`;
  return {
    passed: failing.length === 0,
    observed: `${shown.value} for ${seriesText(shown.labels)}, ${tally}`,
  };
}

/** The sample nearest to failing: the highest under "<", the lowest over ">", else the first. */
function closest(samples: readonly Sample[], { op }: Threshold): Sample {
  const sign = op.startsWith("<") ? 1 : op.startsWith(">") ? -1 : 0;
  return samples.reduce((best, s) => (sign * (s.value - best.value) > 0 ? s : best));
}

/** "< 0.05" */
export const wanted = (threshold: Threshold): string => `${threshold.op} ${threshold.value}`;
