import type { DeclaredApproval } from "./approval-document.ts";
import { compareDiagnostics, compareStrings, type Diagnostic, type SourcePosition } from "./diagnostic.ts";
import { pathLooksLikeRollout, textLooksLikeRollout } from "./document-kind.ts";
import type { FleetResource } from "./document-schema.ts";
import { type FleetFile, shapeProblem } from "./file-text.ts";
import { formatIdentity, type ResourceIdentity } from "./identity.ts";
import { type Declaration, type ParsedFleetFile, type ParseOptions, parseFleetFile } from "./parse.ts";
import type { DeclaredPlacement } from "./placement-document.ts";
import type { DeclaredRollout } from "./rollout-document.ts";
import { ROLLOUT_KIND } from "./rollout-schema.ts";

/** A CR the fleet repository wants on the hub, with where it was declared. */
export interface DesiredResource {
  resource: FleetResource;
  /** The fleet file, relative to the repository root. */
  path: string;
  /** 0-based position among the file's documents. */
  documentIndex: number;
  /** The 1-based line where the document starts. */
  line: number;
}

/**
 * `failed`: the file has at least one error and contributes no CR. The CRs it held must keep their last
 * good state and must never be pruned: a typo must not uninstall Knative from a cluster.
 */
type FileStatus = "valid" | "failed";

export interface FileResult {
  path: string;
  status: FileStatus;
  /** The CRs the file declares, as far as they could be read: a YAML syntax error can hide some. */
  declares: ResourceIdentity[];
}

export type { FleetFile } from "./file-text.ts";

export interface FleetModel {
  /** The CRs of the valid files, by path and document. */
  resources: DesiredResource[];
  /**
   * The errors, by path, line and column: at most MAX_DIAGNOSTICS_PER_FILE per file and MAX_DIAGNOSTICS in
   * all, so a hostile repository cannot flood a log, a status file or a PR comment.
   */
  diagnostics: Diagnostic[];
  /** How many errors were left out of `diagnostics` by those bounds. */
  omittedDiagnostics: number;
  /** Every file, by path. */
  files: FileResult[];
  /** The placements of the valid files (src/placement expands them against the hub's inventory). */
  placements: DeclaredPlacement[];
  rollout: FleetRolloutPolicy;
  /** The approvals of rollout waves in valid files (a broken one approves nothing). */
  approvals: DeclaredApproval[];
}

/** The repository's rollout policy (src/rollout); without one, every change goes out at once. */
export interface FleetRolloutPolicy {
  /** The one valid KnativeRollout of the repository. */
  policy?: DeclaredRollout;
  /**
   * Files that failed and hold or look like a rollout policy (`isMeantAsRollout`): an invalid policy, a
   * second one, one with a misspelled kind, in another encoding or with a syntax error. While there is
   * one, `policy` is absent and every change is held rather than sent everywhere at once, which is what a
   * broken policy would otherwise mean.
   */
  failedPaths: string[];
}

/**
 * Parses and validates the fleet files, then checks them against each other: the same CR declared twice,
 * or two CRs of a kind for one cluster, is an error on every file involved and none of the copies is used.
 */
export function buildFleetModel(files: readonly FleetFile[], options: ParseOptions): FleetModel {
  const sorted = [...files].sort((a, b) => compareStrings(a.path, b.path));
  const parsed = sorted.map((file) => readFile(file, options));
  const declarations = parsed.flatMap((file) =>
    file.documents.flatMap((document) =>
      document.declaration ? [{ path: file.path, ...document.declaration }] : [],
    ),
  );
  const allDiagnostics = [
    ...parsed.flatMap((file) => file.diagnostics),
    ...duplicateResourceDiagnostics(declarations),
    ...sharedClusterDiagnostics(declarations),
    ...duplicateRolloutDiagnostics(parsed),
  ];
  const failedPaths = new Set(allDiagnostics.map((diagnostic) => diagnostic.path));
  const diagnostics = boundedDiagnostics(allDiagnostics);
  const failedRollouts = parsed
    .filter((file, index) => failedPaths.has(file.path) && isMeantAsRollout(sorted[index]!, file))
    .map((file) => file.path);
  const policies = parsed.flatMap((file) => file.documents.flatMap((document) => document.rollout ?? []));
  return {
    resources: parsed.filter((file) => !failedPaths.has(file.path)).flatMap(desiredResources),
    placements: parsed
      .filter((file) => !failedPaths.has(file.path))
      .flatMap((file) => file.documents.flatMap((document) => document.placement ?? [])),
    approvals: parsed
      .filter((file) => !failedPaths.has(file.path))
      .flatMap((file) => file.documents.flatMap((document) => document.approval ?? [])),
    rollout: {
      ...(failedRollouts.length === 0 && policies.length === 1 ? { policy: policies[0]! } : {}),
      failedPaths: failedRollouts,
    },
    diagnostics,
    omittedDiagnostics: allDiagnostics.length - diagnostics.length,
    files: parsed.map((file) => ({
      path: file.path,
      status: failedPaths.has(file.path) ? "failed" : "valid",
      declares: file.documents.flatMap((document) =>
        document.declaration ? [document.declaration.identity] : [],
      ),
    })),
  };
}

/**
 * Whether a failed file is taken for a broken rollout policy, which holds every change: its name says
 * `rollout`; or a document of it is, or looks like, one (`looksLikeRollout`); or, when no document says what
 * it is (the file is in another encoding, has a syntax error, is no regular file), its text read leniently
 * looks like one. A policy that cannot be read must hold changes as a paused one would; a file that only
 * seems to be one holds them until it is fixed, with an error that names it. A broken placement or
 * per-cluster file is none of these (a placement's fields tell it apart even without its kind): it holds
 * only what it declares, and the valid policy stays in effect.
 */
function isMeantAsRollout(file: FleetFile, parsed: ParsedFleetFile): boolean {
  if (pathLooksLikeRollout(file.path)) return true;
  const kinds = parsed.documents.flatMap((document) => document.meantKind ?? []);
  if (kinds.length > 0) return kinds.includes(ROLLOUT_KIND);
  const text = file.problem ? file.problem.lenientText : file.text;
  return text !== undefined && textLooksLikeRollout(text);
}

/**
 * One file, whatever it holds: a path that is no readable file, or any failure while parsing it (the parser
 * is a large surface for hostile input), is that file's diagnostic, and the other files go on.
 */
function readFile(file: FleetFile, options: ParseOptions): ParsedFleetFile {
  const failed = (position: SourcePosition, message: string): ParsedFleetFile => ({
    path: file.path,
    documents: [],
    diagnostics: [{ path: file.path, ...position, field: "", message }],
  });
  const problem = file.problem ?? shapeProblem(file.path, file.text)?.problem;
  if (problem) return failed(problem, problem.message);
  try {
    return parseFleetFile(file.path, file.text, options);
  } catch (error) {
    const reason = error instanceof RangeError ? "it is nested too deeply" : String(error);
    return failed({ line: 1, column: 1 }, `cannot read the file: ${reason}`);
  }
}

export const MAX_DIAGNOSTICS_PER_FILE = 20;
export const MAX_DIAGNOSTICS = 500;

/**
 * The first errors of each file, in order, up to the bounds; an error found twice (the same file, place,
 * field and text) is kept once.
 */
export function boundedDiagnostics(diagnostics: readonly Diagnostic[]): Diagnostic[] {
  const perFile = new Map<string, number>();
  const kept: Diagnostic[] = [];
  let previous: Diagnostic | undefined;
  for (const diagnostic of [...diagnostics].sort(compareDiagnostics)) {
    if (previous !== undefined && compareDiagnostics(previous, diagnostic) === 0) continue;
    previous = diagnostic;
    const count = perFile.get(diagnostic.path) ?? 0;
    if (count >= MAX_DIAGNOSTICS_PER_FILE) continue;
    perFile.set(diagnostic.path, count + 1);
    kept.push(diagnostic);
    if (kept.length === MAX_DIAGNOSTICS) break;
  }
  return kept;
}

function desiredResources(file: ParsedFleetFile): DesiredResource[] {
  // In a file without diagnostics every document validated, so every document has its resource.
  return file.documents.flatMap(({ resource, index, position }) =>
    resource ? [{ resource, path: file.path, documentIndex: index, line: position.line }] : [],
  );
}

type LocatedDeclaration = Declaration & { path: string };

/** Something only one document in the whole fleet may declare (a CR's name, a cluster's kind of CR). */
export interface Claim {
  key: string;
  /** What is claimed, as the message names it. */
  subject: string;
  owner: ResourceIdentity;
  path: string;
  position: SourcePosition;
  field: string;
}

function duplicateResourceDiagnostics(declarations: readonly LocatedDeclaration[]): Diagnostic[] {
  const claims = declarations.map(({ identity, path, namePosition }) => ({
    key: formatIdentity(identity),
    subject: formatIdentity(identity),
    owner: identity,
    path,
    position: namePosition,
    field: "metadata.name",
  }));
  return conflictDiagnostics(
    claims,
    (claim, others) => `${claim.subject} is also declared at ${others}; no copy is applied`,
    where,
  );
}

/**
 * Two CRs of one kind on one cluster would install the same cluster-wide Knative twice and fight over it.
 * Copies of one CR are left out here: they are already reported as duplicates.
 */
function sharedClusterDiagnostics(declarations: readonly LocatedDeclaration[]): Diagnostic[] {
  const firstCopies = [...Map.groupBy(declarations, (d) => formatIdentity(d.identity)).values()].map(
    (copies) => copies[0]!,
  );
  const claims = firstCopies.flatMap(({ identity, path, cluster }) =>
    cluster
      ? [
          {
            key: `${identity.kind} ${cluster.label}`,
            subject: cluster.label,
            owner: identity,
            path,
            ...cluster,
          },
        ]
      : [],
  );
  return conflictDiagnostics(
    claims,
    (claim, rivals) => {
      const { kind } = claim.owner;
      return `${formatIdentity(claim.owner)} installs on ${claim.subject}, as does ${rivals}; a cluster runs one ${kind}, so none of them is applied`;
    },
    (other) => `${formatIdentity(other.owner)} (${where(other)})`,
  );
}

/** A repository has one rollout policy: a second one fails every file that holds one. */
function duplicateRolloutDiagnostics(files: readonly ParsedFleetFile[]): Diagnostic[] {
  const rollouts = files.flatMap((file) =>
    file.documents
      .filter((document) => document.isRollout)
      .map((document) => ({ path: file.path, document })),
  );
  if (rollouts.length < 2) return [];
  return rollouts.map(({ path, document }) => ({
    path,
    ...document.position,
    field: "kind",
    message: `a fleet repository holds one KnativeRollout; ${rollouts.length} are declared (${rollouts
      .map((other) => `${other.path}:${other.document.position.line}`)
      .join(", ")}), so changes wait until one is left`,
  }));
}

/** How many items a message names (rival declarations, clusters); the rest are counted. */
const MAX_NAMED = 3;

/** `a, b, c and 7 more`: a list in a message that stays short however long the list. */
export function namedAndCounted<T>(items: readonly T[], describe: (item: T) => string): string {
  const named = items.slice(0, MAX_NAMED).map(describe);
  const more = items.length - named.length;
  return more > 0 ? `${named.join(", ")} and ${more} more` : named.join(", ");
}

/**
 * One diagnostic per claim whose key another claim shares, at the claim (every file involved fails). The
 * message names a few of the others and counts the rest: N copies make N short lines, not N².
 */
export function conflictDiagnostics<C extends Claim>(
  claims: readonly C[],
  explain: (claim: C, others: string) => string,
  describe: (claim: C) => string,
): Diagnostic[] {
  return [...Map.groupBy(claims, (claim) => claim.key).values()]
    .filter((group) => group.length > 1)
    .flatMap((group) =>
      group.map((claim) => ({
        path: claim.path,
        ...claim.position,
        field: claim.field,
        message: explain(
          claim,
          namedAndCounted(
            group.filter((other) => other !== claim),
            describe,
          ),
        ),
      })),
    );
}

function where(claim: Claim): string {
  return `${claim.path}:${claim.position.line}:${claim.position.column}`;
}
