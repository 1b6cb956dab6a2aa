// The soak's invariants as pure judgements over what it observed: Git history, prunes, waves, leaders and
// owners, log lines, resource slopes. The driver feeds them; each returns the evidence of a violation (a
// sentence naming what, where and when), so a counter that is not 0 says why. Unit-tested on the violations
// they must catch (test/unit/soak/checks.test.ts): a check that cannot fail would prove nothing.

/** Every invariant the report counts; all must stay 0. */
export const INVARIANTS = {
  converged: "every cluster converges to the last pushed revision within the bound once faults stop",
  "no-prune-of-declared": "no prune of a CR whose file (or placement) still declares it",
  "spec-from-pushed-revision": "no hub CR and no spoke carries a spec that no push declared",
  "waves-within-max-unavailable": "a wave never has more than maxUnavailable changed CRs unhealthy",
  "git-history": "no force push, status commits on real heads, no person's push lost, no empty status commit",
  "one-leader": "never two leaders at once",
  "one-owner-per-cluster": "never two replicas reporting (owning) one cluster at once",
  "finalizers-complete": "every deleted CR is finalized, or says why not",
  "no-spoke-leftovers": "no spoke keeps the install of a removed CR",
  "no-uncaught-errors": "no uncaught exception or unhandled rejection",
  "actionable-error-lines": "every error line says what failed and on what",
  "webhook-served":
    "a genuine signed delivery is served while slow senders from another address hold connections",
} as const;
export type Invariant = keyof typeof INVARIANTS;

export interface Violation {
  invariant: Invariant;
  /** Date.now() when it was seen. */
  at: number;
  /** What the soak was doing then (the push or fault in progress). */
  step: string;
  evidence: string;
}

// ── Git history ────────────────────────────────────────────────────────────────────────────────────────

export interface GitCommit {
  id: string;
  parents: string[];
  tree: string;
  author: string;
}

/** One update of the branch as the server's `update` hook saw it. */
export interface RefUpdate {
  old: string;
  new: string;
  /** `git merge-base --is-ancestor old new`; true for the branch's creation. */
  fastForward: boolean;
}

const ZERO = /^0+$/;

/**
 * The branch's history against what happened to it: every update a fast-forward, every status commit on a
 * commit that was the branch head and changing something, every person's push still in the history.
 */
export function gitHistoryViolations(input: {
  /** The branch's commits (any order). */
  commits: readonly GitCommit[];
  updates: readonly RefUpdate[];
  /** The commits people pushed (what `git push` reported), with their subjects. */
  personPushes: readonly { commit: string; message: string }[];
  botAuthor: string;
}): string[] {
  const problems: string[] = [];
  for (const update of input.updates)
    if (!update.fastForward && !ZERO.test(update.old))
      problems.push(
        `the branch was force-pushed from ${update.old.slice(0, 12)} to ${update.new.slice(0, 12)}`,
      );
  const heads = new Set(input.updates.map((u) => u.new));
  const byId = new Map(input.commits.map((c) => [c.id, c]));
  for (const commit of input.commits.filter((c) => c.author === input.botAuthor)) {
    const [parent, ...more] = commit.parents;
    if (parent === undefined || more.length > 0)
      problems.push(`status commit ${commit.id.slice(0, 12)} has ${commit.parents.length} parents`);
    else if (!heads.has(parent))
      problems.push(
        `status commit ${commit.id.slice(0, 12)}'s parent ${parent.slice(0, 12)} was never the branch head`,
      );
    else if (byId.get(parent)?.tree === commit.tree)
      problems.push(
        `status commit ${commit.id.slice(0, 12)} changes nothing (same tree as ${parent.slice(0, 12)})`,
      );
  }
  for (const push of input.personPushes)
    if (!byId.has(push.commit))
      problems.push(
        `the push "${push.message}" (${push.commit.slice(0, 12)}) is no longer in the branch's history`,
      );
  return problems;
}

/** A line of the `update` hook's log: `<old> <new> ff|forced`. */
export function parseRefUpdate(line: string): RefUpdate | undefined {
  const match = /^([0-9a-f]{40}) ([0-9a-f]{40}) (ff|forced)$/.exec(line.trim());
  return match ? { old: match[1]!, new: match[2]!, fastForward: match[3] === "ff" } : undefined;
}

// ── Prunes ─────────────────────────────────────────────────────────────────────────────────────────────

/**
 * When each CR key was declared (by a file or a placement) and when not: a CR deleted while it was declared
 * the whole time since it appeared was pruned against its file.
 */
export class DeclarationHistory {
  private readonly undeclared = new Map<string, { from: number; to?: number }[]>();
  private declared = new Set<string>();

  /** The keys declared from `at` on (every key not in it is undeclared from then). */
  update(keys: ReadonlySet<string>, at: number): void {
    for (const key of keys) {
      const spans = this.undeclared.get(key);
      const open = spans?.at(-1);
      if (open && open.to === undefined) open.to = at;
      if (!spans) this.undeclared.set(key, [{ from: Number.NEGATIVE_INFINITY, to: at }]);
    }
    for (const key of this.declared) if (!keys.has(key)) this.undeclared.get(key)!.push({ from: at });
    this.declared = new Set(keys);
  }

  isDeclared(key: string): boolean {
    return this.declared.has(key);
  }

  /** Whether the key was undeclared at some moment of [from, to]; a key never declared always was. */
  undeclaredDuring(key: string, from: number, to: number): boolean {
    const spans = this.undeclared.get(key);
    if (!spans) return true;
    return spans.some((span) => span.from <= to && (span.to === undefined || span.to >= from));
  }
}

// ── Waves ──────────────────────────────────────────────────────────────────────────────────────────────

/** A hub CR as the wave check sees it. */
export interface WaveCr {
  key: string;
  wave: string;
  /** Its desired hash now, and the baseline the rollout state holds for it (none: new, counts as changed). */
  hash: string;
  baseline: string | undefined;
  healthy: boolean;
  /**
   * Wanted by the fleet the whole time the gate may have been deciding. A CR that left (its cluster relabelled
   * out or gone, its file removed) is no member by the gate's guarantee 5 and blocks no wave; one that left or
   * joined a moment ago may have been read either way.
   */
  member: boolean;
  /** When its current unhealthy streak began, and when its hash last changed (Date.now()). */
  unhealthySince: number | undefined;
  changedAt: number | undefined;
  /** For the CR let through: it was changed and unhealthy already before this content (counted already). */
  wasUnavailable?: boolean;
}

/**
 * Right after `letThrough` got new content: how many of its wave's changed CRs are unhealthy. A CR that
 * turned unhealthy on its own (a fault, after its change) within `graceMs` is not counted: the gate may
 * have read it healthy a moment before. A CR that was counted already (changed and unhealthy, a fix going
 * out in its own place) adds nothing, nor does a CR that is no settled member. Returns the evidence when the count exceeds `maxUnavailable`.
 */
export function waveViolation(
  letThrough: WaveCr,
  crs: readonly WaveCr[],
  maxUnavailable: number,
  now: number,
  graceMs: number,
): string | undefined {
  if (letThrough.wasUnavailable) return undefined;
  const counted = crs.filter(
    (cr) =>
      cr.wave === letThrough.wave &&
      (cr.member || cr.key === letThrough.key) &&
      cr.hash !== cr.baseline &&
      !cr.healthy &&
      (cr.key === letThrough.key ||
        cr.unhealthySince === undefined ||
        (cr.changedAt !== undefined && cr.unhealthySince <= cr.changedAt + 1_000) ||
        now - cr.unhealthySince >= graceMs),
  );
  if (counted.length <= maxUnavailable) return undefined;
  return (
    `${letThrough.key} got new content while ${counted.length} changed CRs of wave ${letThrough.wave} were ` +
    `unhealthy (maxUnavailable ${maxUnavailable}): ${counted.map((cr) => cr.key).join(", ")}`
  );
}

// ── Leaders and owners ─────────────────────────────────────────────────────────────────────────────────

/** One replica's /metrics, read at `at` (Date.now() when the answer came). */
export interface ReplicaSample {
  replica: string;
  at: number;
  leader: boolean;
  /** Clusters it reports series for (`namespace/name`), each with the metrics that name it. */
  clusters: Readonly<Record<string, readonly string[]>>;
}

/** Pairs of replicas sampled within `skewMs` of each other that both lead, or both report a cluster. */
export function ownershipViolations(
  samples: readonly ReplicaSample[],
  skewMs: number,
): { invariant: "one-leader" | "one-owner-per-cluster"; evidence: string }[] {
  const found: { invariant: "one-leader" | "one-owner-per-cluster"; evidence: string }[] = [];
  for (let i = 0; i < samples.length; i++)
    for (let j = i + 1; j < samples.length; j++) {
      const [a, b] = [samples[i]!, samples[j]!];
      if (a.replica === b.replica || Math.abs(a.at - b.at) > skewMs) continue;
      const apart = `${Math.abs(a.at - b.at)} ms apart`;
      if (a.leader && b.leader)
        found.push({
          invariant: "one-leader",
          evidence: `${a.replica} and ${b.replica} both lead (${apart})`,
        });
      const shared = Object.keys(a.clusters).filter((c) => c in b.clusters);
      // Which metrics name the cluster in each: a reconcile's series is ownership, a stray one is a leak.
      const series = (s: ReplicaSample) => [...new Set(shared.flatMap((c) => s.clusters[c]!))].join(" ");
      if (shared.length > 0)
        found.push({
          invariant: "one-owner-per-cluster",
          evidence: `${a.replica} and ${b.replica} both report ${shared.join(", ")} (${apart}; ${a.replica}: ${series(a)}; ${b.replica}: ${series(b)})`,
        });
    }
  return found;
}

/** The clusters a /metrics text reports series for (any `cluster` label but the hub), with the metrics. */
export function clustersIn(metrics: string): Record<string, string[]> {
  const found = new Map<string, Set<string>>();
  for (const [, metric, cluster] of metrics.matchAll(/^(\w+)\{[^}]*\bcluster="([^"]+)"/gm)) {
    if (cluster === "hub") continue;
    const names = found.get(cluster!) ?? new Set<string>();
    names.add(metric!.replace(/_(bucket|sum|count)$/, ""));
    found.set(cluster!, names);
  }
  return Object.fromEntries([...found.keys()].sort().map((c) => [c, [...found.get(c)!].sort()]));
}

// ── Logs ───────────────────────────────────────────────────────────────────────────────────────────────

export interface LogJudgement {
  /** pino's level (60 fatal, 50 error, 40 warn); 60 for a line that is not JSON. */
  level: number;
  /** The message with its error, numbers and ids blanked: lines that differ only there group together. */
  summary: string;
  uncaught?: string;
  unactionable?: string;
}

/** Fields that name what a line is about: with one of them, a terse transport error still says where. */
const SUBJECT_FIELDS = [
  "cluster",
  "cr",
  "resource",
  "kind",
  "path",
  "file",
  "url",
  "server",
  "lease",
  "namespace",
  "name",
  "repository",
  "provider",
  "object",
];
const TERSE =
  /^(Error: )?(fetch failed|terminated|other side closed|socket hang up|This operation was aborted|aborted)$/i;
const PROGRAMMING_ERROR = /\b(TypeError|ReferenceError|RangeError)\b|is not a function|Cannot read propert/;

/**
 * One line of a replica's log (pino JSON on stdout and stderr): whether it reports an uncaught error, and
 * for an error line whether a user can act on it (it says what failed, it is not a programming error, an
 * object printed as `[object Object]`, or a bare transport error that names nothing). Undefined for lines
 * below warn.
 */
export function judgeLogLine(line: string): LogJudgement | undefined {
  if (line.trim() === "") return undefined;
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    const summary = blank(line.trim()).slice(0, 160);
    if (/unhandled|uncaught|^\s*at |^\w*Error\b/i.test(line))
      return { level: 60, summary, uncaught: `not a log line, an error Node printed: ${line.trim()}` };
    return { level: 60, summary, unactionable: `not a log line: ${line.trim().slice(0, 200)}` };
  }
  const level = typeof entry.level === "number" ? entry.level : 30;
  if (level < 40) return undefined;
  const msg = typeof entry.msg === "string" ? entry.msg : "";
  const err = errorText(entry.err);
  const summary = blank(err ? `${msg}: ${err.split("\n")[0]}` : msg).slice(0, 200);
  const judgement: LogJudgement = { level, summary };
  if (msg.startsWith("uncaught error")) judgement.uncaught = `${msg}: ${err}`;
  if (level < 50) return judgement;
  if (msg.trim() === "") judgement.unactionable = "an error line without a message";
  else if (/\[object Object\]/.test(`${msg} ${err}`))
    judgement.unactionable = `an object printed as text: ${msg}: ${err}`;
  else if (err !== undefined && /^(undefined|null|Error)?$/.test(err.trim()))
    judgement.unactionable = `an error without a message: ${msg}: "${err}"`;
  else if (err !== undefined && PROGRAMMING_ERROR.test(err))
    judgement.unactionable = `a programming error, not something a user can act on: ${msg}: ${err.split("\n")[0]}`;
  else if (err !== undefined && TERSE.test(err.trim()) && !SUBJECT_FIELDS.some((f) => f in entry))
    judgement.unactionable = `a transport error that names nothing: ${msg}: ${err}`;
  return judgement;
}

function errorText(err: unknown): string | undefined {
  if (err === undefined) return undefined;
  if (typeof err === "string") return err;
  if (typeof err === "object" && err !== null) {
    const { type, message } = err as { type?: unknown; message?: unknown };
    return `${typeof type === "string" ? `${type}: ` : ""}${typeof message === "string" ? message : JSON.stringify(err)}`;
  }
  return String(err);
}

const blank = (text: string) =>
  text
    // A uuid first: its last group alone would pass for an id and leave the rest unblanked.
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<uuid>")
    .replace(/\b[0-9a-f]{12,40}\b/g, "<id>")
    .replace(/\b\d+\b/g, "<n>");

// ── Resources ──────────────────────────────────────────────────────────────────────────────────────────

/** The least-squares slope of `value` over time, per hour; 0 with fewer than two points. */
export function slopePerHour(points: readonly { at: number; value: number }[]): number {
  if (points.length < 2) return 0;
  const hours = points.map((p) => p.at / 3_600_000);
  const meanX = hours.reduce((a, b) => a + b, 0) / points.length;
  const meanY = points.reduce((a, p) => a + p.value, 0) / points.length;
  let num = 0;
  let den = 0;
  points.forEach((p, i) => {
    num += (hours[i]! - meanX) * (p.value - meanY);
    den += (hours[i]! - meanX) ** 2;
  });
  return den === 0 ? 0 : num / den;
}

/** The value at the given quantile (0..1) of a list, nearest rank; undefined for an empty list. */
export function quantile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}
