import { ConditionType } from "../api/conditions.ts";
import type { KnativeKind } from "../api/knative.ts";

// Version resolution and the upgrade rule of the upstream Knative Operator (pkg/reconciler/common/releases.go):
// an empty version or `latest` is the newest release, `x.y` the newest patch of that minor, anything else must
// be an exact release; moving the installed version by more than one minor at once is refused.

export class VersionError extends Error {
  override name = "VersionError";
}

interface ParsedVersion {
  major: number;
  minor: number;
  patch: number | undefined;
}

const VERSION_PATTERN = /^(0|[1-9]\d*)\.(0|[1-9]\d*)(?:\.(0|[1-9]\d*))?$/;
const LATEST = "latest";

export function parseVersion(version: string): ParsedVersion | undefined {
  const match = VERSION_PATTERN.exec(version);
  if (!match) return undefined;
  const [, major, minor, patch] = match;
  return {
    major: Number(major),
    minor: Number(minor),
    patch: patch === undefined ? undefined : Number(patch),
  };
}

/** Orders `x.y.z` release versions newest first; anything else sorts last. */
export function newestFirst(a: string, b: string): number {
  const [left, right] = [parseVersion(a), parseVersion(b)];
  if (!left || !right) return left ? -1 : right ? 1 : 0;
  return right.major - left.major || right.minor - left.minor || (right.patch ?? 0) - (left.patch ?? 0);
}

/** Whether `version` reads as a Knative version, `x.y.z` or `x.y`. */
export function isKnativeVersion(version: string): boolean {
  return parseVersion(version) !== undefined;
}

/** Whether `version` is a full release version, `x.y.z`. */
export function isReleaseVersion(version: string): boolean {
  return parseVersion(version)?.patch !== undefined;
}

/** `1.22.1` -> `1.22`, the directory the ingress manifests of a Serving release live in. */
export function minorOf(version: string): string {
  const parsed = parseVersion(version);
  if (!parsed) throw new VersionError(`"${version}" is not a Knative version (MAJOR.MINOR.PATCH)`);
  return `${parsed.major}.${parsed.minor}`;
}

/**
 * The release to install for `requested` (spec.version) among `available` (the releases the source ships).
 * Throws a VersionError that lists what exists when nothing matches.
 */
export function resolveVersion(
  requested: string | undefined,
  available: readonly string[],
  what: string,
): string {
  const releases = available.filter(isReleaseVersion).sort(newestFirst);
  const listing = releases.length > 0 ? `available: ${releases.join(", ")}` : "no release is available";
  const wanted = requested?.trim() ?? "";
  if (wanted === "" || wanted.toLowerCase() === LATEST) {
    if (releases.length === 0) throw new VersionError(`no ${what} release is available`);
    return releases[0]!;
  }
  const parsed = parseVersion(wanted);
  if (!parsed) {
    throw new VersionError(
      `${what} version "${wanted}" is not valid: expected MAJOR.MINOR.PATCH, MAJOR.MINOR or latest (${listing})`,
    );
  }
  const match =
    parsed.patch === undefined
      ? releases.find((release) => minorOf(release) === wanted)
      : releases.find((release) => release === wanted);
  if (!match) throw new VersionError(`${what} ${wanted} is not available (${listing})`);
  return match;
}

/** The VersionMigrationEligible condition, as upstream sets it. */
type MigrationEligibility =
  | { type: typeof ConditionType.VersionMigrationEligible; status: "True" }
  | {
      type: typeof ConditionType.VersionMigrationEligible;
      status: "False";
      reason: "Error";
      message: string;
    };

/**
 * Whether the installed version (status.version) may move to `target`: at most one minor up or down, never
 * across a major. Nothing installed yet, or `latest` installed, is always eligible.
 */
export function checkVersionMigration(
  kind: KnativeKind,
  installed: string | undefined,
  target: string,
): MigrationEligibility {
  const type = ConditionType.VersionMigrationEligible;
  if (!installed || installed.toLowerCase() === LATEST) return { type, status: "True" };
  const current = parseVersion(installed);
  const wanted = parseVersion(target);
  if (!wanted) throw new VersionError(`target version "${target}" is not a Knative version`);
  // Upstream prints the installed version the way it compares it, with a leading v.
  const refusal = (detail: string): MigrationEligibility => ({
    type,
    status: "False",
    reason: "Error",
    message:
      `Version migration is not eligible with message: not supported to upgrade or downgrade across ${detail}. ` +
      `The installed ${kind} version is v${installed}.`,
  });
  if (!current || current.major !== wanted.major) return refusal("the MAJOR version");
  if (Math.abs(current.minor - wanted.minor) >= 2) return refusal("multiple MINOR versions");
  return { type, status: "True" };
}
