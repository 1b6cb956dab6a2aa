import { randomBytes } from "node:crypto";
import type { KubeClient } from "./client.ts";
import type { KubeObject } from "./object.ts";

// A key Secret: random bytes knative-fleet makes once, in a namespace of its own, and marks with the
// Secret's uid. It is used only when so marked (or when a person adopted it): a Secret made beforehand,
// copied or restored carries another uid. The mark says whose intent the Secret carries; the namespace is the
// boundary. The rollout state's seal (rollout/state-store.ts) and the shard members' proofs
// (service/shard-key.ts) each have one.

/** Where one key Secret lives and how it is marked. */
export interface KeySecret {
  namespace: string;
  name: string;
  /** The data key holding the key's bytes (base64). */
  dataKey: string;
  /** Set by knative-fleet: the Secret's uid. */
  markAnnotation: string;
  /** Set by a person: use this Secret although knative-fleet did not make it (the value says why). */
  adoptAnnotation: string;
}

/** The key Secret as found: none, knative-fleet's (marked with its own uid), or someone else's. */
type KeySecretLookup =
  | { kind: "absent" }
  | { kind: "ours"; secret: KubeObject }
  | { kind: "foreign"; secret: KubeObject; adoptWhy: string | undefined };

export async function lookUpKeySecret(hub: KubeClient, where: KeySecret): Promise<KeySecretLookup> {
  const secret = await hub.get("v1", "Secret", where.namespace, where.name);
  if (secret === undefined) return { kind: "absent" };
  const mark = secret.metadata.annotations?.[where.markAnnotation];
  if (secret.metadata.uid !== undefined && mark === secret.metadata.uid) return { kind: "ours", secret };
  return { kind: "foreign", secret, adoptWhy: secret.metadata.annotations?.[where.adoptAnnotation] };
}

/**
 * Makes the key Secret (32 random bytes), then marks it. Not forced, and under a field manager of its own:
 * a key another writer (another replica) made meanwhile is a conflict, never overwritten. A server-side
 * apply at the Secret's own name, so RBAC can limit even its creation to that name.
 */
export async function makeKeySecret(hub: KubeClient, where: KeySecret): Promise<KubeObject> {
  const made = await hub.apply(
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: where.name, namespace: where.namespace },
      type: "Opaque",
      data: { [where.dataKey]: randomBytes(32).toString("base64") },
    },
    { force: false, fieldManager: `knative-fleet-key-${randomBytes(4).toString("hex")}` },
  );
  return markKeySecret(hub, where, made);
}

/** Marks the key Secret as knative-fleet's with its uid, dropping a person's adoption in the same patch. */
export function markKeySecret(hub: KubeClient, where: KeySecret, secret: KubeObject): Promise<KubeObject> {
  return hub.mergePatch("v1", "Secret", where.namespace, where.name, {
    metadata: { annotations: { [where.adoptAnnotation]: null, [where.markAnnotation]: secret.metadata.uid } },
  });
}

/** The key's bytes; an error when there are fewer than 16. */
export function keyBytes(secret: KubeObject, where: KeySecret): Uint8Array {
  const data = secret.data as Record<string, string> | undefined;
  const key = Buffer.from(data?.[where.dataKey] ?? "", "base64");
  if (key.length < 16)
    throw new Error(`Secret ${where.namespace}/${where.name} has no key of at least 16 bytes`);
  return key;
}
