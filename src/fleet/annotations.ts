/** Annotations a fleet file may set on a CR; the later stages (mirror, reconcile) read them from the CR. */
export const FLEET_ANNOTATION_PREFIX = "fleet.knative.dev/";

/**
 * `fleet.knative.dev/prune: disabled` keeps a CR (and what it installed) when its file is deleted from
 * Git: the mirror stage leaves the hub CR in place instead of pruning it.
 */
export const PRUNE_ANNOTATION = `${FLEET_ANNOTATION_PREFIX}prune`;
export const PRUNE_DISABLED = "disabled";

/** Whether an object's annotations opt it out of pruning. */
export function isPruneDisabled(annotations: Readonly<Record<string, string>> | undefined): boolean {
  return annotations?.[PRUNE_ANNOTATION] === PRUNE_DISABLED;
}
