import { minorOf, newestFirst } from "../render/index.ts";

// Knative's community support window: "We (the community) support the most recent 2 versions of Knative"
// (knative/community mechanics/RELEASE-VERSIONING-PRINCIPLES.md; older copies of the page said 4, which is
// how many minors the upstream operator ships, not how many get fixes). A minor is released about every
// 13 weeks, so one is supported for about six months: endoflife.date's dates below end each minor about two
// weeks after the release two minors later. Past it a minor gets no fixes, security ones included; it keeps
// running, so this is a warning, never a blocker.

/** endoflife.date (api/knative.json): each minor's end of support, newest first. */
const END_OF_SUPPORT: readonly (readonly [minor: string, ends: string])[] = [
  ["1.21", "2026-08-04"],
  ["1.20", "2026-05-05"],
  ["1.19", "2026-02-03"],
  ["1.18", "2025-10-28"],
  ["1.17", "2025-07-28"],
];
const OLDEST_LISTED = END_OF_SUPPORT.at(-1)!;
/** How many of the newest minors the community supports. */
const SUPPORTED_MINORS = 2;

/** Why a minor is past its end of support, or undefined while it is supported (or nothing is known). */
export function endOfSupport(
  knativeVersion: string,
  now: Date,
  releases: readonly string[] = [],
): string | undefined {
  const minor = minorOf(knativeVersion);
  const listed = END_OF_SUPPORT.find(([known]) => known === minor);
  if (listed && now.getTime() >= Date.parse(`${listed[1]}T00:00:00Z`)) {
    return `Knative ${minor}'s community support ended on ${listed[1]}`;
  }
  if (!listed && newestFirst(`${minor}.0`, `${OLDEST_LISTED[0]}.0`) > 0) {
    return `Knative ${minor}'s community support ended before ${OLDEST_LISTED[1]} (when ${OLDEST_LISTED[0]}'s did)`;
  }
  // A minor with no date yet: it is out once two newer minors are released (among those this build ships).
  const newer = [...new Set(releases.flatMap(minorOrNothing))]
    .filter((other) => newestFirst(`${other}.0`, `${minor}.0`) < 0)
    .sort((a, b) => newestFirst(`${a}.0`, `${b}.0`));
  if (newer.length < SUPPORTED_MINORS) return undefined;
  return (
    `Knative ${newer.join(" and ")} ${newer.length === 1 ? "is" : "are"} released after ${minor}: the community ` +
    `supports the ${SUPPORTED_MINORS} most recent minors`
  );
}

function minorOrNothing(version: string): string[] {
  try {
    return [minorOf(version)];
  } catch {
    return [];
  }
}
