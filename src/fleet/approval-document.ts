import { z } from "zod";
import { isRecord } from "../kube/object.ts";
import type { Diagnostic, SourcePosition } from "./diagnostic.ts";
import { Dns1123LabelSchema, FleetMetadataSchema } from "./document-schema.ts";
import { APPROVAL_KIND, ROLLOUT_API_VERSION } from "./rollout-schema.ts";
import { validateAgainstSchema } from "./schema-diagnostics.ts";
import { withDefaultNamespace, withoutNullFields } from "./values.ts";
import type { SourceDocument } from "./yaml-source.ts";

// An approval held in Git (docs/approvals.md): a wave whose policy says `approval: Required` opens only once
// the tracked branch holds one of these for the rollout's commit and that wave. It is a fleet file like any
// other, so it is reviewed, audited and reverted like a change; it names the commit in full, so an approval
// of one change never opens a wave for another (a commit's id cannot be known before it is made, so no
// commit approves itself).

const CommitIdSchema = z
  .string()
  .regex(/^([0-9a-f]{40}|[0-9a-f]{64})$/, {
    error: "must be a whole commit id (40 or 64 lowercase hex digits), as the rollout's status names it",
  })
  .describe("The commit the rollout started at, in full: an approval of any other commit never counts.");

export const ApprovalDocumentSchema = z.strictObject({
  apiVersion: z.literal(ROLLOUT_API_VERSION),
  kind: z.literal(APPROVAL_KIND),
  metadata: FleetMetadataSchema,
  spec: z.strictObject({
    commit: CommitIdSchema,
    wave: Dns1123LabelSchema.describe("The wave of the KnativeRollout this approval opens."),
    approvedBy: z
      .string()
      .min(1)
      .max(256)
      .optional()
      .describe("Who approved, for people reading the history."),
    reason: z.string().max(1024).optional(),
  }),
});

/** A valid approval of a fleet repository, with where it was written. */
export interface DeclaredApproval {
  commit: string;
  wave: string;
  approvedBy?: string;
  /** The fleet file, relative to the repository root. */
  path: string;
  position: SourcePosition;
}

/** Validates one KnativeRolloutApproval document; every problem is a diagnostic at its file, line and field. */
export function parseApprovalDocument(
  path: string,
  document: SourceDocument,
  defaultNamespace: string,
): { approval?: DeclaredApproval; diagnostics: Diagnostic[] } {
  const value = withDefaultNamespace(withoutNullFields(document.value), defaultNamespace);
  const result = validateAgainstSchema(path, document, isRecord(value) ? value : {}, ApprovalDocumentSchema);
  if (!result.success) return { diagnostics: result.diagnostics };
  const { commit, wave, approvedBy } = result.data.spec;
  return {
    approval: { commit, wave, ...(approvedBy && { approvedBy }), path, position: document.position },
    diagnostics: [],
  };
}

/** The key an approval is looked up by: the rollout's commit and the wave. */
export const approvalKey = (commit: string, wave: string): string => `${commit} ${wave}`;
