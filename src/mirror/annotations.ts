import { MANAGED_BY, MANAGED_BY_LABEL } from "../apply/ownership.ts";
import { FLEET_ANNOTATION_PREFIX } from "../fleet/annotations.ts";
import type { KubeObject } from "../kube/object.ts";

/** The repository a hub CR was mirrored from. */
export const SOURCE_REPOSITORY_ANNOTATION = `${FLEET_ANNOTATION_PREFIX}source-repository`;
/** The fleet file, relative to the repository root, that declares the CR. */
export const SOURCE_PATH_ANNOTATION = `${FLEET_ANNOTATION_PREFIX}source-path`;
/**
 * The commit whose content the CR holds. Written only together with a content change, never on its own:
 * otherwise every commit (the status write-back's own included) would rewrite every CR.
 */
export const SOURCE_COMMIT_ANNOTATION = `${FLEET_ANNOTATION_PREFIX}source-commit`;

/**
 * A person's approval of a held prune, on the ConfigMap `PRUNE_CONFIRMATION_CONFIGMAP` in knative-fleet's
 * hub namespace. The value is the token the held prune reports, which names exactly the CRs it deletes.
 */
export const CONFIRM_PRUNE_ANNOTATION = `${FLEET_ANNOTATION_PREFIX}confirm-prune`;
export const PRUNE_CONFIRMATION_CONFIGMAP = "knative-fleet-prune";

/** Whether the mirror created this hub CR; it never touches one it did not (a hand-made CR). */
export const isMirrored = (object: KubeObject): boolean =>
  object.metadata.labels?.[MANAGED_BY_LABEL] === MANAGED_BY;
