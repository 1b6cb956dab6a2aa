import type { Diagnostic } from "../fleet/diagnostic.ts";
import type { ResourceIdentity } from "../fleet/identity.ts";
import type { ObjectRef } from "../kube/object.ts";
import type { PruneReport } from "../mirror/decide.ts";
import type { PlacementPlan } from "../placement/plan.ts";
import type { RolloutPlan } from "../rollout/plan.ts";
import type { ChangedFile, RemovalDecision, ResourceAction } from "./changes.ts";
import type { FieldChange } from "./diff.ts";

// The plan as data: what `-o json` prints and the Markdown is rendered from. Everything is sorted
// and nothing depends on the clock, so the same commits (and cluster state) give the same plan.

/** `live`: read from the cluster, changes from a server-side dry run; `offline`: rendered base vs head. */
export type PlanSource = "live" | "offline";

type FindingCode =
  /** head asks for a version the release manifests do not have */
  | "version-unknown"
  /** more than one minor from the installed version: the hub controller refuses it */
  | "version-jump"
  /** the cluster's Kubernetes (its ClusterProfile's) is older than the release needs: nothing is applied */
  | "kubernetes-version"
  /** the Serving ingress (or ingress-class) changes: traffic moves to another ingress */
  | "ingress-change"
  /** spec.clusterProfileRef cannot change on an existing CR: the hub refuses the update */
  | "cluster-immutable"
  /** the CR's manifests cannot be loaded or rendered */
  | "render-failed"
  /** the server's dry run refused an object: the real apply would fail the same way */
  | "apply-refused"
  /** live: the cluster is not ready for the CR (src/preflight), the message led by its reason */
  | "preflight"
  /** the CR's cluster could not be read: its part of the plan is offline (a warning; the exit code is 2) */
  | "cluster-unreachable"
  /** live: someone else changed the install on the cluster (who, which fields), and what happens to it */
  | "drift"
  /** the cluster's install is in the older upstream layout (the hub CR's namespace) and is adopted there */
  | "layout-adopted"
  /** merging uninstalls Knative from a cluster */
  | "removes-knative"
  /** the mirror's safeguards keep a removed CR for now */
  | "prune-held"
  | "prune-skipped"
  /** the hub would refuse the CR: the admission (src/admission), or another repository owns its name */
  | "hub-refuses"
  /** the CR replaces another removed for the same cluster: its install passes from one to the other */
  | "reinstall"
  /** a placement selects no cluster after the merge (and which it selected before) */
  | "placement-selects-none"
  /** what a placement selects needs the hub's ClusterProfiles: its CRs are not in the plan */
  | "placement-unknown"
  /** no file of head matches the file glob */
  | "no-fleet-files"
  /** head adds or changes YAML files the file glob leaves out: nobody reads them */
  | "files-left-out"
  /** the rollout policy is removed: the next change goes to every cluster at once */
  | "rollout-removed"
  /** the rollout policy fails validation: every change waits until it is fixed */
  | "rollout-invalid"
  /** allAtOnce is set: the merge goes to every cluster at once, without waves */
  | "rollout-all-at-once";

export interface Finding {
  severity: "error" | "warning";
  code: FindingCode;
  message: string;
}

/** An object an apply changes, with the fields that change; `refused` when the dry run was refused. */
export interface ObjectChange extends ObjectRef {
  fields: FieldChange[];
  refused?: string;
}

interface ObjectChanges {
  created: ObjectRef[];
  changed: ObjectChange[];
  deleted: ObjectRef[];
}

/** What happens to a CR whose file is removed, or whose cluster leaves its placement. */
interface RemovalReport extends RemovalDecision {
  /** Another CR of the kind installs on the same cluster: FinalizeRemoteCluster leaves the cluster alone. */
  sharedWith?: string;
  /** What stays on the cluster: CRDs, the install namespace, objects outside it. */
  kept: ObjectRef[];
}

export interface ResourcePlan extends ResourceIdentity {
  /** `namespace/name` of the ClusterProfile, `hub`, or unknown for a CR only an invalid file declares. */
  cluster: string;
  path: string;
  action: ResourceAction;
  /** A reinstall's CR that is removed for the same cluster. */
  replaces?: string;
  /** How the objects were worked out; absent when the cluster was not consulted (an invalid file, a refused change). */
  source?: PlanSource;
  /** Why this CR's part is offline: no cluster access was given, or its cluster could not be read. */
  offlineReason?: string;
  /** The installed (or base's) version and the one head installs. */
  version?: { from?: string; to?: string };
  /**
   * Head's version is several minors ahead: the upgrade chain's minors from the hub CR's to the file's, and
   * the step this merge starts (`version.to` is that step's release); each step is a rollout of its own.
   */
  chain?: { minors: string[]; step: string; target: string };
  /**
   * A CR the merge creates (or reinstalls): what it sets of the fields a reviewer reads (version,
   * high-availability, workloads, podDisruptionBudgets, config; spec.ts), credential-like values masked.
   * A field left out is the release's default.
   */
  spec?: Record<string, unknown>;
  objects: ObjectChanges;
  removal?: RemovalReport;
  findings: Finding[];
}

export interface ClusterPlan {
  cluster: string;
  resources: ResourcePlan[];
}

/** A finding about the fleet rather than one CR: a placement, the rollout policy. */
export interface FleetFinding extends Finding {
  /** What it is about: a placement's identity, or the rollout policy's file. */
  subject: string;
}

export interface FleetPlan {
  repository: string;
  base: { ref: string; commit: string };
  head: { ref: string; commit: string };
  source: PlanSource;
  /** A live plan (--kubeconfig) that could not read the hub, and is offline: which hub, and why. */
  offlineReason?: string;
  files: ChangedFile[];
  /** The local checkout's uncommitted edits to fleet files: not in the plan, which reads commits. */
  uncommitted?: ChangedFile[];
  /**
   * head's validation errors, as `validate` reports them, placement conflicts and the settings check's
   * errors included; then the settings check's warnings (`severity: "warning"`).
   */
  diagnostics: Diagnostic[];
  /** How many of them were left out by the model's bounds. */
  omittedDiagnostics: number;
  prune: Pick<PruneReport, "state" | "reason" | "message">;
  clusters: ClusterPlan[];
  placements: PlacementPlan;
  /** Absent when neither base nor head has a rollout policy. */
  rollout?: RolloutPlan;
  findings: FleetFinding[];
  /** CRs the merge creates, updates, reinstalls or deletes. */
  changes: number;
  /** Every validation error and error finding, of CRs and of the fleet: any makes the exit code 1. */
  errors: number;
  /** Every warning finding and warning diagnostic. */
  warnings: number;
}
