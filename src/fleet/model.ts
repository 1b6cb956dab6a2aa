import type { DeclaredPlacement } from "../placement/document.ts";
import { compareDiagnostics, compareStrings, type Diagnostic, type SourcePosition } from "./diagnostic.ts";
import type { FleetResource } from "./document-schema.ts";
import {
  type Declaration,
  formatIdentity,
  type ParsedFleetFile,
  type ParseOptions,
  parseFleetFile,
  type ResourceIdentity,
} from "./parse.ts";

/** A fleet file's repository-relative path (`/`-separated) and its text, from a checkout or a Git tree. */
export interface FleetFile {
  path: string;
  text: string;
}

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
export type FileStatus = "valid" | "failed";

export interface FileResult {
  path: string;
  status: FileStatus;
  /** The CRs the file declares, as far as they could be read: a YAML syntax error can hide some. */
  declares: ResourceIdentity[];
}

export interface FleetModel {
  /** The CRs of the valid files, by path and document. */
  resources: DesiredResource[];
  /** Every error, by path, line and column. */
  diagnostics: Diagnostic[];
  /** Every file, by path. */
  files: FileResult[];
  /** The placements of the valid files (src/placement expands them against the hub's inventory). */
  placements: DeclaredPlacement[];
}

/**
 * Parses and validates the fleet files, then checks them against each other: the same CR declared twice,
 * or two CRs of a kind for one cluster, is an error on every file involved and none of the copies is used.
 */
export function buildFleetModel(files: readonly FleetFile[], options: ParseOptions): FleetModel {
  const parsed = [...files]
    .sort((a, b) => compareStrings(a.path, b.path))
    .map((file) => parseFleetFile(file.path, file.text, options));
  const declarations = parsed.flatMap((file) =>
    file.documents.flatMap((document) =>
      document.declaration ? [{ path: file.path, ...document.declaration }] : [],
    ),
  );
  const diagnostics = [
    ...parsed.flatMap((file) => file.diagnostics),
    ...duplicateResourceDiagnostics(declarations),
    ...sharedClusterDiagnostics(declarations),
  ].sort(compareDiagnostics);
  const failedPaths = new Set(diagnostics.map((diagnostic) => diagnostic.path));
  return {
    resources: parsed.filter((file) => !failedPaths.has(file.path)).flatMap(desiredResources),
    placements: parsed
      .filter((file) => !failedPaths.has(file.path))
      .flatMap((file) => file.documents.flatMap((document) => document.placement ?? [])),
    diagnostics,
    files: parsed.map((file) => ({
      path: file.path,
      status: failedPaths.has(file.path) ? "failed" : "valid",
      declares: file.documents.flatMap((document) =>
        document.declaration ? [document.declaration.identity] : [],
      ),
    })),
  };
}

function desiredResources(file: ParsedFleetFile): DesiredResource[] {
  // In a file without diagnostics every document validated, so every document has its resource.
  return file.documents.flatMap(({ resource, index, position }) =>
    resource ? [{ resource, path: file.path, documentIndex: index, line: position.line }] : [],
  );
}

type LocatedDeclaration = Declaration & { path: string };

/** Something only one document in the whole fleet may declare. */
interface Claim {
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
    (claim, others) =>
      `${claim.subject} is also declared at ${others.map(where).join(", ")}; no copy is applied`,
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
  return conflictDiagnostics(claims, (claim, others) => {
    const rivals = others.map((other) => `${formatIdentity(other.owner)} (${where(other)})`).join(", ");
    const { kind } = claim.owner;
    return `${formatIdentity(claim.owner)} installs on ${claim.subject}, as does ${rivals}; a cluster runs one ${kind}, so none of them is applied`;
  });
}

/** One diagnostic per claim whose key another claim shares, at the claim, naming the others. */
function conflictDiagnostics(
  claims: readonly Claim[],
  explain: (claim: Claim, others: Claim[]) => string,
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
          group.filter((other) => other !== claim),
        ),
      })),
    );
}

function where(claim: Claim): string {
  return `${claim.path}:${claim.position.line}:${claim.position.column}`;
}
