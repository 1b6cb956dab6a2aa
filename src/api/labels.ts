// The vocabulary on the wire: every label, annotation, finalizer and extension name knative-fleet reads or
// writes (test/unit/layering.test.ts finds no such name spelt elsewhere).
// Names shared with the upstream Knative Operator keep its spelling, so CRs and installs move between the two.

const FLEET = "fleet.knative.dev/";

// --- On every object an install applies (and on the hub CRs the mirror applies) ---

export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "knative-fleet";
/** The CR an installed object belongs to (upstream's label). */
export const CR_NAME_LABEL = "operator.knative.dev/cr-name";
/** Which kind of CR an object belongs to (lower-case kind), so two CRs of one name stay apart. */
export const CR_KIND_LABEL = `${FLEET}cr-kind`;
/**
 * sha256 of what was last applied: a converged object is skipped without a request (see apply/compare.ts),
 * and a change in it makes server-side apply run so fields we no longer set are dropped.
 */
export const DESIRED_HASH_ANNOTATION = `${FLEET}desired-hash`;

// --- On the anchor ConfigMap `{kind}-{name}-root-owner` (upstream's names and texts) ---

export const ANCHOR_ANNOTATION = "operator.knative.dev/anchor";
export const PROTECTED_ANNOTATION = "operator.knative.dev/protected";
export const DESCRIPTION_ANNOTATION = "operator.knative.dev/description";
/** The anchor's data key holding what was applied (a cli-utils style inventory), one JSON ref a line. */
export const INVENTORY_KEY = "inventory";

/** Which component an object belongs to; upstream sets it where a release leaves it out. */
export const NAME_LABEL = "app.kubernetes.io/name";
/** Istio's sidecar injection switch: upstream turns it off on its Jobs. */
export const ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject";
/**
 * The annotation the upstream operator's client (manifestival) reads as the "original" of its three-way merge
 * and writes after each apply. knative-fleet applies server-side and would otherwise leave it as the last
 * client-side writer left it: after a hand-over the upstream operator would then merge against a stale or
 * missing original and keep fields a new release dropped (a CRD keeping its conversion webhook while its
 * strategy becomes None, which the API server refuses). Writing what was applied keeps its merge right.
 */
export const LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration";

// --- Read on the spoke, as Kubernetes sets it ---

/** On each EndpointSlice, the Service it belongs to: the webhook check selects by it (install/webhooks.ts). */
export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

// --- On hub CRs: set by a fleet file, or by the mirror ---

/**
 * `fleet.knative.dev/prune: disabled` keeps a CR (and what it installed) when its file is deleted from
 * Git: the mirror stage leaves the hub CR in place instead of pruning it.
 */
export const PRUNE_ANNOTATION = `${FLEET}prune`;
export const PRUNE_DISABLED = "disabled";
/** The repository a hub CR was mirrored from. */
export const SOURCE_REPOSITORY_ANNOTATION = `${FLEET}source-repository`;
/** The fleet file, relative to the repository root, that declares the CR. */
export const SOURCE_PATH_ANNOTATION = `${FLEET}source-path`;
/**
 * The commit whose content the CR holds. Written only together with a content change, never on its own:
 * otherwise every commit (the status write-back's own included) would rewrite every CR.
 */
export const SOURCE_COMMIT_ANNOTATION = `${FLEET}source-commit`;
/**
 * On a fleet file's KnativeServing/KnativeEventing (or a placement, for the CRs it makes): the settings the
 * release-aware check (src/render/settings-check.ts) does not know but that are meant, comma-separated, e.g.
 * `spec.config.autoscaler.new-key, spec.workloads.my-extra-deployment` (a `.*` suffix covers what is below).
 */
export const ALLOW_UNKNOWN_SETTINGS_ANNOTATION = `${FLEET}allow-unknown-settings`;
/**
 * Set on a hub CR by a person, naming the repository (its URL as the service is configured with it) that
 * may take the CR over from the one in its source-repository annotation. Without it, a CR another
 * repository mirrored is a conflict: left alone, never updated, never pruned.
 */
export const ADOPT_ANNOTATION = `${FLEET}adopt`;
/** Set to "true" on a CR being deleted to give up cleaning its spoke (the spoke is gone for good). */
export const ABANDON_CLEANUP_ANNOTATION = `${FLEET}abandon-cleanup`;
/** The upstream operator's finalizer names (knative.dev/pkg: `<plural>.<group>`), so CRs move between the two. */
export const FINALIZERS = {
  KnativeServing: "knativeservings.operator.knative.dev",
  KnativeEventing: "knativeeventings.operator.knative.dev",
} as const;

// --- On the hub CRs a placement makes (src/placement), so the hub, the status and people can trace them ---

/** The placement's name. */
export const PLACEMENT_LABEL = `${FLEET}placement`;
/** The placement's kind, in lower case (a label value), e.g. `knativeservingplacement`. */
export const PLACEMENT_KIND_LABEL = `${FLEET}placement-kind`;
/** The ClusterProfile (`namespace/name`) the CR was made for. */
export const SOURCE_CLUSTER_ANNOTATION = `${FLEET}source-cluster`;

// --- Read from the inventory (SIG Multicluster) ---

/** On a PlacementDecision: the key that ties the slices of one decision together. */
export const DECISION_KEY_LABEL = "multicluster.x-k8s.io/decision-key";
/** SIG Auth's reserved extension name: what a ClusterProfile passes its plugin (ExecCredential spec.cluster.config). */
export const EXEC_EXTENSION = "client.authentication.k8s.io/exec";
/** KEP 5339's reserved extension names: arguments a ClusterProfile adds to its provider's exec plugin, */
export const ADDITIONAL_ARGS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args";
/** and environment variables it adds to the plugin's. */
export const ADDITIONAL_ENVS_EXTENSION = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs";

// --- Rollout (src/rollout) ---

/** On a hub CR that keeps its last applied spec: the revision it waits for and why. */
export const ROLLOUT_WAITING_ANNOTATION = `${FLEET}rollout-waiting`;
/** `true` on the rollout state ConfigMap pauses the rollout from the hub (no wave opens, no CR changes). */
export const ROLLOUT_PAUSED_ANNOTATION = `${FLEET}rollout-paused`;
/** On the rollout state ConfigMap, set by knative-fleet: why it refuses the state (not written by it). */
export const ROLLOUT_REFUSED_ANNOTATION = `${FLEET}rollout-refused`;
/**
 * On the rollout state ConfigMap, set by a person: start the rollout state over although it is refused or
 * missing; the value says why (logged and recorded as an Event), and knative-fleet removes it once acted on.
 */
export const ROLLOUT_START_OVER_ANNOTATION = `${FLEET}rollout-start-over`;
/**
 * On the rollout key Secret, set by knative-fleet: the Secret's uid, once knative-fleet made it (or a person
 * adopted it). A key Secret without it (made by someone else beforehand, copied, restored) is refused. It
 * says whose intent the Secret carries, it is no security boundary: the key's namespace is.
 */
export const ROLLOUT_KEY_MARK_ANNOTATION = `${FLEET}rollout-key`;
/**
 * On the rollout key Secret, set by a person: use this Secret, which knative-fleet did not make, as the key;
 * the value says why (logged and recorded as an Event), and knative-fleet replaces it with its mark.
 */
export const ADOPT_ROLLOUT_KEY_ANNOTATION = `${FLEET}adopt-rollout-key`;

// --- Upgrade chains (src/upgrade) ---

/**
 * On a hub CR whose spec.version is one step of an upgrade chain: the version its file wants. The step is
 * the hub CR's own spec.version; without this annotation the hub CR has the version its file gives.
 */
export const UPGRADE_TARGET_ANNOTATION = `${FLEET}upgrade-target`;

// --- Drift (src/apply/drift.ts, src/install/drift-owner.ts) ---

/**
 * On a fleet file's CR (or a placement's template): `report` leaves a change made on the spoke in place and
 * reports it; `correct` (the default) puts back what Git wants and reports what it put back.
 */
export const DRIFT_MODE_ANNOTATION = `${FLEET}drift`;
/** In a hub CR's status.annotations: the last drift found on its cluster, as JSON (api/drift.ts). */
export const DRIFT_STATUS_ANNOTATION = `${FLEET}last-drift`;

// --- Verification gates (src/verify) ---

/** On a Secret in knative-fleet's namespace, "true": a verification gate may read its token from it. */
export const GATE_SECRET_LABEL = `${FLEET}verification-gate`;

// --- Sharding (src/service/sharding.ts): on the member Leases ---

/** On every member Lease of one sharded deployment; its value is the group name. */
export const SHARD_GROUP_LABEL = `${FLEET}shard-group`;
/** The digest of the member list whose share the member has narrowed to ("left" once it stopped). */
export const SHARD_VIEW_ANNOTATION = `${FLEET}shard-view`;
/** A random name for the member's current view: the others' acknowledgements must name it to count. */
export const SHARD_EPOCH_ANNOTATION = `${FLEET}shard-epoch`;
/** The other members' epochs this member saw before it wrote its acknowledgement (comma-separated). */
export const SHARD_SEEN_ANNOTATION = `${FLEET}shard-seen`;
/** An HMAC, under the shard key, of the member Lease's holder, renewTime and the three annotations above. */
export const SHARD_PROOF_ANNOTATION = `${FLEET}shard-proof`;
/** On the shard key Secret, set by knative-fleet: its uid (see ROLLOUT_KEY_MARK_ANNOTATION). */
export const SHARD_KEY_MARK_ANNOTATION = `${FLEET}shard-key`;
/** On the shard key Secret, set by a person: use it although knative-fleet did not make it (why). */
export const ADOPT_SHARD_KEY_ANNOTATION = `${FLEET}adopt-shard-key`;

// --- On the prune-confirmation ConfigMap in knative-fleet's hub namespace ---

/**
 * A person's approval of a held prune, on the ConfigMap `PRUNE_CONFIRMATION_CONFIGMAP`. The value is the
 * token the held prune reports, which names exactly the CRs it deletes.
 */
export const CONFIRM_PRUNE_ANNOTATION = `${FLEET}confirm-prune`;
export const PRUNE_CONFIRMATION_CONFIGMAP = "knative-fleet-prune";

type Labelled = { metadata: { labels?: Record<string, string>; annotations?: Record<string, string> } };

/** Whether an object's annotations opt it out of pruning. */
export const isPruneDisabled = (annotations: Readonly<Record<string, string>> | undefined): boolean =>
  annotations?.[PRUNE_ANNOTATION] === PRUNE_DISABLED;

/** Whether knative-fleet applied this object; the mirror never touches a hub CR it did not (a hand-made CR). */
export const isManagedByFleet = (object: Labelled): boolean =>
  object.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY;
