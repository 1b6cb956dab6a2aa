/** Go duration units knative-fleet accepts (a subset of time.ParseDuration's). */
const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

/** A Go duration ("10s", "1m30s", "500ms") in milliseconds; undefined when the text is not one. */
export function durationMs(text: string): number | undefined {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== text.trim()) return undefined;
  return parts.reduce((ms, p) => ms + Number(p[1]) * DURATION_UNITS[p[2]!]!, 0);
}

/** Milliseconds as a Go duration, in the largest unit that divides them: 300000 -> "5m", 90000 -> "90s". */
export function formatDuration(ms: number): string {
  const unit = (["h", "m", "s"] as const).find((u) => ms % DURATION_UNITS[u]! === 0);
  return unit ? `${ms / DURATION_UNITS[unit]!}${unit}` : `${ms}ms`;
}
