import { KNATIVE_KINDS, OPERATOR_API_VERSION } from "../api/knative.ts";
import { CONFIRM_PRUNE_ANNOTATION, PRUNE_CONFIRMATION_CONFIGMAP } from "../api/labels.ts";
import { formatIdentity, identityOf, type ResourceIdentity } from "../fleet/identity.ts";
import type { KubeClient } from "../kube/client.ts";
import type { KubeObject } from "../kube/object.ts";
import { HELD_PRUNE_KEY, heldPruneRecord, type PruneReport } from "./decide.ts";

// The mirror's side of the hub: what a sync reads there and writes back. `hubMirror` is the hub itself;
// `MemoryHub` a picture of it held in memory, which `plan` runs the same sync over, dry: the same
// decisions, no request (a dry-run is an option of the same applier, as in cli-utils).

/** What a sync reads from the hub before it decides anything. */
interface HubRead {
  /** The KnativeServing and KnativeEventing CRs in every namespace, mirrored or not. */
  live: KubeObject[];
  /** The prune-confirmation ConfigMap, where a person confirms a held prune. */
  confirmation?: KubeObject;
}

export interface MirrorHub {
  read(): Promise<HubRead>;
  /** Server-side apply of a hub CR; a refusal is thrown. */
  apply(object: KubeObject): Promise<void>;
  delete(identity: ResourceIdentity): Promise<void>;
  /** Writes the held prune on the prune-confirmation ConfigMap, or takes it away; only when it changes. */
  recordHeldPrune(prune: PruneReport, confirmation: KubeObject | undefined): Promise<void>;
  /** The prune-confirmation ConfigMap alone: what a held prune waits on between syncs. */
  confirmation(): Promise<KubeObject | undefined>;
  /** One hub CR alone: what a declared CR whose hub copy is being deleted waits on between syncs. */
  get(identity: ResourceIdentity): Promise<KubeObject | undefined>;
}

/** The token a person confirmed a held prune with, on the prune-confirmation ConfigMap. */
export const confirmedToken = (confirmation: KubeObject | undefined): string | undefined =>
  confirmation?.metadata.annotations?.[CONFIRM_PRUNE_ANNOTATION];

/** The hub, through the process's client; knative-fleet's own objects live in `namespace`. */
export function hubMirror(hub: KubeClient, namespace: string): MirrorHub {
  const confirmation = () => hub.get("v1", "ConfigMap", namespace, PRUNE_CONFIRMATION_CONFIGMAP);
  return {
    read: async () => {
      const [live, confirmed] = await Promise.all([listHubResources(hub), confirmation()]);
      return { live, ...(confirmed && { confirmation: confirmed }) };
    },
    confirmation,
    get: ({ kind, namespace: ns, name }) => hub.get(OPERATOR_API_VERSION, kind, ns, name),
    apply: async (object) => {
      await hub.apply(object);
    },
    delete: async ({ kind, namespace: ns, name }) => {
      await hub.delete(OPERATOR_API_VERSION, kind, ns, name);
    },
    recordHeldPrune: async (prune, configMap) => {
      const held = heldPruneRecord(prune);
      const have = (configMap?.data as Record<string, string> | undefined)?.[HELD_PRUNE_KEY];
      if (held === have || (held === undefined && configMap === undefined)) return;
      await hub.apply({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: PRUNE_CONFIRMATION_CONFIGMAP, namespace },
        data: held === undefined ? {} : { [HELD_PRUNE_KEY]: held },
      });
    },
  };
}

/** The KnativeServing and KnativeEventing CRs on the hub, in every namespace, mirrored or not. */
export async function listHubResources(hub: KubeClient): Promise<KubeObject[]> {
  const lists = await Promise.all(KNATIVE_KINDS.map((kind) => hub.list(OPERATOR_API_VERSION, kind)));
  return lists.flatMap((list) => list.items);
}

/**
 * The hub CRs held in memory: what a dry sync reads, and what its writes change. A sync of base over it
 * leaves the hub as merging base would; a sync of head over that is the merge. Nothing is sent anywhere.
 */
export class MemoryHub implements MirrorHub {
  readonly #objects = new Map<string, KubeObject>();

  constructor(objects: readonly KubeObject[] = []) {
    for (const object of objects) this.#objects.set(formatIdentity(identityOf(object)), object);
  }

  async read(): Promise<HubRead> {
    return { live: [...this.#objects.values()] };
  }

  async apply(object: KubeObject): Promise<void> {
    this.#objects.set(formatIdentity(identityOf(object)), object);
  }

  async delete(identity: ResourceIdentity): Promise<void> {
    this.#objects.delete(formatIdentity(identity));
  }

  async recordHeldPrune(): Promise<void> {}

  async confirmation(): Promise<undefined> {
    return undefined;
  }

  async get(identity: ResourceIdentity): Promise<KubeObject | undefined> {
    return this.#objects.get(formatIdentity(identity));
  }
}
