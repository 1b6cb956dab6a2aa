import { KNATIVE_KINDS, type KnativeKind, OPERATOR_API_VERSION } from "../api/knative.ts";
import { isRecord } from "../kube/object.ts";
import { type DeclaredApproval, parseApprovalDocument } from "./approval-document.ts";
import { type Diagnostic, type FieldPath, formatFieldPath, type SourcePosition } from "./diagnostic.ts";
import { looksLikeRollout, meantKind, misspelledKind } from "./document-kind.ts";
import { FleetDocumentSchema, type FleetResource } from "./document-schema.ts";
import { clusterKey, type ResourceIdentity } from "./identity.ts";
import { type DeclaredPlacement, isPlacementDocument, parsePlacementDocument } from "./placement-document.ts";
import { PLACEMENT_API_VERSION } from "./placement-schema.ts";
import { type DeclaredRollout, parseRolloutDocument } from "./rollout-document.ts";
import { APPROVAL_KIND, ROLLOUT_API_VERSION, ROLLOUT_KIND } from "./rollout-schema.ts";
import { validateAgainstSchema } from "./schema-diagnostics.ts";
import { withDefaultNamespace, withoutNullFields } from "./values.ts";
import { locateField, parseYamlFile, type SourceDocument } from "./yaml-source.ts";

/** The hub namespace a CR is mirrored to when its fleet file names none. */
export const DEFAULT_NAMESPACE = "knative-fleet";

export interface ParseOptions {
  /** The namespace a CR without `metadata.namespace` gets. */
  defaultNamespace: string;
}

/**
 * What a document claims, read even when it is otherwise invalid: a broken copy of a CR still conflicts
 * with another copy, or the good copy would be applied while the broken one is held at its last state.
 */
export interface Declaration {
  identity: ResourceIdentity;
  /** Where `metadata.name` is. */
  namePosition: SourcePosition;
  /** The cluster the CR installs on, as people name it; absent when `clusterProfileRef` is unreadable. */
  cluster?: { label: string; position: SourcePosition; field: string };
}

interface ParsedDocument {
  /** 0-based position among the file's documents. */
  index: number;
  position: SourcePosition;
  declaration?: Declaration;
  /** The validated CR, namespace defaulted; absent when the document has an error. */
  resource?: FleetResource;
  /** The validated placement (src/placement), when the document is one. */
  placement?: DeclaredPlacement;
  /** Whether the document is a rollout policy (kind KnativeRollout), valid or not. */
  isRollout?: boolean;
  /**
   * The fleet kind the document is meant as, also when misspelled (document-kind.ts): KnativeRollout for
   * whatever looks like a rollout policy; absent when it names no fleet kind.
   */
  meantKind?: string;
  /** The validated rollout policy (src/rollout), when the document is one. */
  rollout?: DeclaredRollout;
  /** The validated approval of a wave (src/rollout), when the document is one. */
  approval?: DeclaredApproval;
}

export interface ParsedFleetFile {
  path: string;
  documents: ParsedDocument[];
  diagnostics: Diagnostic[];
}

const ACCEPTED_KINDS = `${KNATIVE_KINDS.join(" or ")} (apiVersion ${OPERATOR_API_VERSION})`;

/** Parses and validates one fleet file: every Knative CR in it, or a diagnostic for each thing wrong. */
export function parseFleetFile(path: string, text: string, options: ParseOptions): ParsedFleetFile {
  const yaml = parseYamlFile(path, text);
  const diagnostics = [...yaml.diagnostics];
  const documents = yaml.documents.map((document) => {
    const parsed = parseDocument(path, document, options);
    diagnostics.push(...parsed.diagnostics);
    return parsed.document;
  });
  return { path, documents, diagnostics };
}

function parseDocument(
  path: string,
  document: SourceDocument,
  options: ParseOptions,
): { document: ParsedDocument; diagnostics: Diagnostic[] } {
  const value = withDefaultNamespace(withoutNullFields(document.value), options.defaultNamespace);
  const kind = isRecord(document.value) ? document.value.kind : undefined;
  const meant = looksLikeRollout(document.value) ? ROLLOUT_KIND : meantKind(kind);
  const parsed: ParsedDocument = {
    index: document.index,
    position: document.position,
    declaration: readDeclaration(document, value),
    ...(kind === ROLLOUT_KIND && { isRollout: true }),
    ...(meant !== undefined && { meantKind: meant }),
  };
  // A broken document's syntax errors are already reported; its recovered value would only add noise.
  if (!document.wellFormed) return { document: parsed, diagnostics: [] };
  if (parsed.isRollout) {
    const { rollout, diagnostics } = parseRolloutDocument(path, document, options.defaultNamespace);
    return { document: { ...parsed, ...(rollout ? { rollout } : {}) }, diagnostics };
  }
  if (meant === ROLLOUT_KIND)
    return { document: parsed, diagnostics: [rolloutKindError(path, document, kind)] };
  // Before the placement's check: an approval shares the placements' apiVersion.
  if (meant === APPROVAL_KIND) {
    if (kind !== APPROVAL_KIND)
      return { document: parsed, diagnostics: [approvalKindError(path, document, kind)] };
    const { approval, diagnostics } = parseApprovalDocument(path, document, options.defaultNamespace);
    return { document: { ...parsed, ...(approval ? { approval } : {}) }, diagnostics };
  }
  if (isPlacementDocument(document.value)) {
    const { placement, diagnostics } = parsePlacementDocument(path, document, options.defaultNamespace);
    return { document: { ...parsed, ...(placement ? { placement } : {}) }, diagnostics };
  }
  const kindError = checkKind(path, document, value);
  if (kindError) return { document: parsed, diagnostics: [kindError] };
  const result = validateAgainstSchema(path, document, value, FleetDocumentSchema);
  return result.success
    ? { document: { ...parsed, resource: result.data }, diagnostics: [] }
    : { document: parsed, diagnostics: result.diagnostics };
}

/** A document that looks like a rollout policy but is not one by its kind: it holds every change. */
function rolloutKindError(path: string, document: SourceDocument, kind: unknown): Diagnostic {
  const holds = "as it looks like a rollout policy, every change waits until it validates";
  const problem =
    kind === undefined
      ? `required field is missing; a rollout policy is kind ${ROLLOUT_KIND} (apiVersion ${ROLLOUT_API_VERSION}), and ${holds}`
      : misspelledKind(kind) === ROLLOUT_KIND
        ? `${JSON.stringify(kind)} is not a kind; did you mean ${ROLLOUT_KIND}? A rollout policy that does not validate holds every change`
        : `${JSON.stringify(kind)} is not a kind of ${PLACEMENT_API_VERSION}, which holds KnativeServingPlacement, KnativeEventingPlacement and ${ROLLOUT_KIND}; ${holds}`;
  return { path, ...locateField(document, ["kind"], "value"), field: "kind", message: problem };
}

/** A misspelled approval: it approves nothing until it is spelled right. */
function approvalKindError(path: string, document: SourceDocument, kind: unknown): Diagnostic {
  return {
    path,
    ...locateField(document, ["kind"], "value"),
    field: "kind",
    message: `${JSON.stringify(kind)} is not a kind; did you mean ${APPROVAL_KIND}? It approves nothing until it validates`,
  };
}

/** Rejects anything but the operator kinds up front, with a message that says what a fleet file holds. */
function checkKind(path: string, document: SourceDocument, value: unknown): Diagnostic | undefined {
  const at = (field: FieldPath, message: string): Diagnostic => ({
    path,
    ...locateField(document, field, "value"),
    field: formatFieldPath(field),
    message,
  });
  if (!isRecord(value)) {
    return at([], `a fleet document must be a Kubernetes object; a fleet file holds ${ACCEPTED_KINDS}`);
  }
  const { apiVersion, kind } = value;
  if (!isKnativeKind(kind)) {
    const typo = misspelledKind(kind);
    const problem =
      kind === undefined
        ? "required field is missing"
        : `${JSON.stringify(kind)} (apiVersion ${String(apiVersion)}) is not accepted${typo ? ` (did you mean ${typo}?)` : ""}`;
    return at(["kind"], `${problem}; a fleet file holds ${ACCEPTED_KINDS}`);
  }
  if (apiVersion !== OPERATOR_API_VERSION) {
    // The Knative docs' older examples: the operator serves v1alpha1 no more, and v1beta1 renamed one field.
    const older =
      apiVersion === OPERATOR_V1ALPHA1
        ? `: v1alpha1 is the operator's older API, which it no longer serves; change the apiVersion to ${OPERATOR_API_VERSION} (spec.deployments is spec.workloads there)`
        : "";
    return at(
      ["apiVersion"],
      `${kind} must be apiVersion ${OPERATOR_API_VERSION}, got ${String(apiVersion)}${older}`,
    );
  }
  return undefined;
}

const OPERATOR_V1ALPHA1 = "operator.knative.dev/v1alpha1";

function readDeclaration(document: SourceDocument, value: unknown): Declaration | undefined {
  if (!isRecord(value) || !isKnativeKind(value.kind) || !isRecord(value.metadata)) return undefined;
  const { name, namespace } = value.metadata;
  if (typeof name !== "string" || typeof namespace !== "string") return undefined;
  return {
    identity: { kind: value.kind, namespace, name },
    namePosition: locateField(document, ["metadata", "name"], "value"),
    cluster: readCluster(document, value.spec),
  };
}

const CLUSTER_PROFILE_REF: FieldPath = ["spec", "clusterProfileRef"];

function readCluster(document: SourceDocument, spec: unknown): Declaration["cluster"] {
  const ref = isRecord(spec) ? spec.clusterProfileRef : undefined;
  // Without clusterProfileRef the operator installs on the hub itself; the position is then `spec:`'s.
  const cluster = {
    position: locateField(document, CLUSTER_PROFILE_REF, "key"),
    field: formatFieldPath(CLUSTER_PROFILE_REF),
  };
  if (ref === undefined) return { label: "the hub cluster", ...cluster };
  if (!isRecord(ref) || typeof ref.namespace !== "string" || typeof ref.name !== "string") return undefined;
  return { label: `ClusterProfile ${clusterKey({ namespace: ref.namespace, name: ref.name })}`, ...cluster };
}

function isKnativeKind(kind: unknown): kind is KnativeKind {
  return (KNATIVE_KINDS as readonly unknown[]).includes(kind);
}
