// The plan stage: what merging a fleet change does to every cluster, read-only, for review before the merge.
export type { ChangedFile, ResourceAction } from "./changes.ts";
export { clusterKubernetesVersions } from "./checks.ts";
export type { LiveClusters } from "./cluster-view.ts";
export type { FieldChange } from "./diff.ts";
export { InventoryError, type PlanInventory, readPlanInventory } from "./inventory.ts";
export { PLAN_MARKER, renderMarkdown } from "./markdown.ts";
export { buildPlan, type PlanOptions } from "./plan.ts";
export type { ClusterPlan, Finding, FleetPlan, ObjectChange, PlanSource, ResourcePlan } from "./report.ts";
export { type Revision, RevisionError, type Revisions, readRevisions } from "./revisions.ts";
