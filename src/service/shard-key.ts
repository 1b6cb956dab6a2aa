import { setTimeout as delay } from "node:timers/promises";
import { ADOPT_SHARD_KEY_ANNOTATION, SHARD_KEY_MARK_ANNOTATION } from "../api/labels.ts";
import type { KubeClient } from "../kube/client.ts";
import {
  type KeySecret,
  keyBytes,
  lookUpKeySecret,
  makeKeySecret,
  markKeySecret,
} from "../kube/key-secret.ts";
import { isConflict } from "../kube/rest.ts";
import type { Logger } from "../observability/log.ts";
import { ConfigError } from "./config.ts";

// The shard members' key: every replica proves its member Lease's acknowledgement with it (sharding.ts), so
// one who may write Leases, but cannot read this Secret, cannot speak for a member. It lives beside the
// rollout key (rollout.keyNamespace, a namespace of its own in the chart), made by the first replica that
// finds none, and used only when knative-fleet made it or a person adopted it.

export const SHARD_KEY_SECRET = "knative-fleet-shard-key";

const shardKeySecret = (namespace: string): KeySecret => ({
  namespace,
  name: SHARD_KEY_SECRET,
  dataKey: "key",
  markAnnotation: SHARD_KEY_MARK_ANNOTATION,
  adoptAnnotation: ADOPT_SHARD_KEY_ANNOTATION,
});

/**
 * The shard key's bytes: read, made when there is none (another replica's wins a race), or refused (a
 * ConfigError: without the key no member can acknowledge a view, so none starts).
 */
export async function loadShardKey(hub: KubeClient, namespace: string, log: Logger): Promise<Uint8Array> {
  return readOrMakeKey(hub, namespace, log).catch((err: Error) => {
    throw new ConfigError(`sharding needs its key: ${err.message}`);
  });
}

async function readOrMakeKey(hub: KubeClient, namespace: string, log: Logger): Promise<Uint8Array> {
  const where = shardKeySecret(namespace);
  const name = `${namespace}/${SHARD_KEY_SECRET}`;
  for (let attempt = 0; ; attempt++) {
    const found = await lookUpKeySecret(hub, where);
    if (found.kind === "ours") return keyBytes(found.secret, where);
    if (found.kind === "foreign") {
      // Another replica may be between making it and marking it: look again before refusing.
      if (found.adoptWhy === undefined && attempt < 3) {
        await delay(1000);
        continue;
      }
      if (found.adoptWhy === undefined)
        throw new Error(
          `the shard key Secret ${name} was not made by knative-fleet (made beforehand, copied or restored?): ` +
            `annotate it ${ADOPT_SHARD_KEY_ANNOTATION}=<why> to use it as the key, or delete it`,
        );
      log.warn(
        { secret: name, why: found.adoptWhy },
        "a shard key Secret knative-fleet did not make is adopted",
      );
      return keyBytes(await markKeySecret(hub, where, found.secret), where);
    }
    try {
      return keyBytes(await makeKeySecret(hub, where), where);
    } catch (err) {
      // Another replica made it meanwhile (its field manager owns the key): read that one.
      if (!isConflict(err) || attempt >= 3) throw err;
    }
  }
}
