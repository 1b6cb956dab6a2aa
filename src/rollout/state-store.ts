import {
  ADOPT_ROLLOUT_KEY_ANNOTATION,
  ROLLOUT_KEY_MARK_ANNOTATION,
  ROLLOUT_REFUSED_ANNOTATION,
  ROLLOUT_START_OVER_ANNOTATION,
} from "../api/labels.ts";
import type { KubeClient } from "../kube/client.ts";
import {
  type KeySecret,
  keyBytes,
  lookUpKeySecret,
  makeKeySecret,
  markKeySecret,
} from "../kube/key-secret.ts";
import type { KubeObject } from "../kube/object.ts";
import type { EventRecorder, InvolvedObject } from "../observability/events.ts";
import type { Logger } from "../observability/log.ts";
import {
  CONFIGMAP_DATA_LIMIT,
  type OpenedState,
  openState,
  ROLLOUT_KEY_SECRET,
  ROLLOUT_KEY_SECRET_KEY,
  ROLLOUT_KEY_SECRET_LAST,
  ROLLOUT_STATE_CONFIGMAP,
  ROLLOUT_STATE_MAC_KEY,
  type RolloutState,
  sealedBytes,
  sealState,
  stateBinding,
} from "./state.ts";

// The sealed rollout state's storage on the hub: the state ConfigMap, checked against the HMAC key in its
// Secret (made when there is none) and the chain the Secret records, refused when someone else wrote it, and
// stored write-ahead. What the state means is state.ts's; what it decides is the gate's. The key Secret is
// used only when knative-fleet made it or a person adopted it (its mark names its uid), and it may live in a
// namespace of its own (rollout.keyNamespace), out of reach of those who may read Secrets beside the state.

interface SealedStateStoreOptions {
  hub: KubeClient;
  /** knative-fleet's hub namespace: the state ConfigMap's. */
  namespace: string;
  /** The key Secret's namespace (service config rollout.keyNamespace; by default `namespace`). */
  keyNamespace: string;
  /** The repository the state rolls out: the seal binds the state to it. */
  repository: string;
  events: EventRecorder;
  log: Logger;
}

/**
 * What the stored state is, once checked: usable (none yet, or this one; `startedOver` when a person chose
 * to start over from a refused or missing one), refused, its key refused (`reason` is the whole sentence,
 * with what a person can do), or unreadable for now.
 */
type OpenedStore =
  | { kind: "ready"; state: RolloutState | undefined; text: string | undefined; startedOver?: string }
  | { kind: "refused"; reason: string }
  | { kind: "keyRefused"; reason: string }
  | { kind: "error"; reason: string };

/** Why the key Secret is not used: every change waits until a person acts. */
interface KeyRefusal {
  refused: string;
}

/** The state ConfigMap as an Event's object. */
export const stateObject = (namespace: string): InvolvedObject => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace },
});

export class SealedStateStore {
  readonly #options: SealedStateStoreOptions;
  #key: Uint8Array | undefined;
  /** The HMAC of the last state stored, as the key Secret records it (read once per leader, then kept). */
  #last: string | undefined;
  /** The state text this leader last stored: a different one read back was written by someone else. */
  #written: string | undefined;
  /** The refused state text last reported, so a refusal is one Event, not one a sync. */
  #refusedText: string | undefined;
  /** The key refusal last reported, likewise (once the key is accepted, it is kept: no refusal follows). */
  #keyRefusal: string | undefined;

  constructor(options: SealedStateStoreOptions) {
    this.#options = options;
  }

  /** The stored state in `configMap`, checked against the key; a refusal is recorded once per refused content. */
  async open(configMap: KubeObject | undefined): Promise<OpenedStore> {
    let key: Uint8Array | KeyRefusal;
    try {
      key = await this.#stateKey(configMap);
    } catch (err) {
      return { kind: "error", reason: err instanceof Error ? err.message : String(err) };
    }
    if (!(key instanceof Uint8Array)) return this.#refuseKey(key.refused);
    const data = configMap?.data as Record<string, unknown> | undefined;
    const { namespace, repository } = this.#options;
    let opened: OpenedState = openState(data, key, stateBinding(namespace, repository), this.#last);
    const text = opened.kind === "valid" ? opened.text : undefined;
    if (opened.kind === "valid" && this.#written !== undefined && text !== this.#written) {
      opened = {
        kind: "refused",
        reason: "it changed since this leader wrote it (an older state put back?)",
      };
    }
    // Once a state was stored, none (deleted, emptied, or replaced by an unsealed text) is no fresh start:
    // starting over would drop the halt and the revert baselines, so it waits for a person to choose it.
    // A state this knative-fleet sealed but cannot read (another release's format) is its own: it starts over.
    if (opened.kind === "none" && opened.legacy !== "unreadable" && this.#last !== undefined) {
      opened = {
        kind: "refused",
        reason:
          configMap === undefined
            ? "it is missing, though knative-fleet stored one (deleted?)"
            : "it holds no sealed state, though knative-fleet stored one (emptied or replaced?)",
      };
    }
    const startOver = configMap?.metadata.annotations?.[ROLLOUT_START_OVER_ANNOTATION];
    if (opened.kind === "refused" && startOver !== undefined) {
      return this.#startOver(opened.reason, startOver);
    }
    await this.#markRefused(configMap, opened.kind === "refused" ? opened.reason : undefined);
    if (opened.kind === "refused") {
      this.#reportRefusal(JSON.stringify(data ?? null), opened.reason);
      return opened;
    }
    this.#refusedText = undefined;
    if (opened.kind === "valid" && opened.mac !== this.#last) {
      // The state stored after the last one recorded (its writer stopped before recording it), or the first
      // since the chain began: recorded now, before anything is decided on it, so it cannot be put back later.
      try {
        await this.#recordLast(opened.mac);
      } catch (err) {
        return { kind: "error", reason: `the last state cannot be recorded (${String(err)})` };
      }
    }
    // From here on this leader vouches for the state: a different text read back was written by someone else.
    if (opened.kind === "valid") this.#written = text;
    if (opened.kind === "none" && opened.legacy) {
      this.#options.log.info(
        "the rollout state was written by an older knative-fleet; the rollout starts over",
      );
    }
    return { kind: "ready", state: opened.kind === "valid" ? opened.state : undefined, text };
  }

  /**
   * Stores the state in place of the last one, then records it as the last in the key Secret: a leader that
   * stops between the two leaves a state its successor still accepts (it names the last one recorded).
   */
  async store(state: RolloutState, text: string): Promise<void> {
    const { hub, namespace, repository } = this.#options;
    const key = this.#key!; // read by `open`, which accepted the state this one follows
    const data = sealState(state, key, stateBinding(namespace, repository), this.#last ?? "");
    const bytes = sealedBytes(data);
    if (bytes > CONFIGMAP_DATA_LIMIT) {
      // Said as it is rather than as the API server's refusal: nothing the state would let through is written.
      throw new Error(
        `the rollout state of ${Object.keys(state.crs).length} CRs takes ${bytes} bytes sealed, more than ` +
          `the ${CONFIGMAP_DATA_LIMIT} a ConfigMap holds: it cannot be stored, and the changes it would let ` +
          "through wait (docs/scale.md, the rollout state)",
      );
    }
    this.#written = undefined; // unknown until the write is known to have landed
    await hub.apply({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: ROLLOUT_STATE_CONFIGMAP, namespace },
      data,
    });
    this.#written = text;
    await this.#recordLast(data[ROLLOUT_STATE_MAC_KEY]!);
  }

  /**
   * A person chose to start over from a refused or missing state: said in the log and an Event, the
   * annotation and the refusal mark taken off (each start-over is one act), and no state to go on. The
   * next state stored names the last one recorded, so the chain goes on.
   */
  async #startOver(refusal: string, why: string): Promise<OpenedStore> {
    const { hub, namespace, log } = this.#options;
    await hub.mergePatch("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP, {
      metadata: {
        annotations: { [ROLLOUT_START_OVER_ANNOTATION]: null, [ROLLOUT_REFUSED_ANNOTATION]: null },
      },
    });
    this.#refusedText = undefined;
    this.#written = undefined;
    log.warn({ refusal, why }, "the rollout state starts over, as a person asked");
    void this.#options.events.record(
      stateObject(namespace),
      "Warning",
      "RolloutStateStartedOver",
      `the rollout state starts over (${why || "no reason given"}); it was refused: ${refusal}`,
    );
    return { kind: "ready", state: undefined, text: undefined, startedOver: why };
  }

  /** A refusal is logged and recorded as an Event once per refused content. */
  #reportRefusal(seen: string, reason: string): void {
    if (this.#refusedText === seen) return;
    this.#refusedText = seen;
    this.#options.log.error({ reason }, "the rollout state is refused; every change waits");
    void this.#options.events.record(
      stateObject(this.#options.namespace),
      "Warning",
      "RolloutStateRefused",
      `the rollout state is refused: ${reason}; every change waits until a person starts it over (annotation ${ROLLOUT_START_OVER_ANNOTATION})`,
    );
  }

  /**
   * Says on the state ConfigMap why it is refused (for `knative-fleet status`, which holds no key), and
   * takes that back once the state is accepted. Written only when it changes.
   */
  async #markRefused(configMap: KubeObject | undefined, reason: string | undefined): Promise<void> {
    const have = configMap?.metadata.annotations?.[ROLLOUT_REFUSED_ANNOTATION];
    if (configMap === undefined || have === reason) return;
    const { hub, namespace, log } = this.#options;
    await hub
      .mergePatch("v1", "ConfigMap", namespace, ROLLOUT_STATE_CONFIGMAP, {
        metadata: { annotations: { [ROLLOUT_REFUSED_ANNOTATION]: reason ?? null } },
      })
      .catch((err: unknown) => log.warn({ err: String(err) }, "cannot mark the rollout state as refused"));
  }

  /**
   * The HMAC key from its Secret, read once per leader with the last state's HMAC it records: made (32
   * random bytes) when there is none, adopted when a person asked, refused when knative-fleet did not make
   * it (no mark naming its uid), or when it is missing though the state ConfigMap holds a sealed state.
   */
  async #stateKey(configMap: KubeObject | undefined): Promise<Uint8Array | KeyRefusal> {
    if (this.#key) return this.#key;
    const where = this.#keySecret();
    const name = `${where.namespace}/${where.name}`;
    const found = await lookUpKeySecret(this.#options.hub, where);
    let secret: KubeObject;
    if (found.kind === "absent") {
      // A sealed state with no key: the key was deleted or moved (rollout.keyNamespace changed). A new key
      // would refuse the state anyway; not making one leaves room to bring the old one back.
      const sealed =
        (configMap?.data as Record<string, unknown> | undefined)?.[ROLLOUT_STATE_MAC_KEY] !== undefined;
      if (sealed && configMap?.metadata.annotations?.[ROLLOUT_START_OVER_ANNOTATION] === undefined) {
        return {
          refused:
            `there is no rollout key Secret ${name}, though the state ConfigMap holds a sealed state (the key ` +
            `deleted, or moved by rollout.keyNamespace?): put the key Secret there and annotate it ` +
            `${ADOPT_ROLLOUT_KEY_ANNOTATION}=<why>, or annotate the state ConfigMap ` +
            `${ROLLOUT_START_OVER_ANNOTATION}=<why> to start over with a new key`,
        };
      }
      secret = await makeKeySecret(this.#options.hub, where);
    } else if (found.kind === "foreign") {
      if (found.adoptWhy === undefined) {
        return {
          refused:
            `the rollout key Secret ${name} was not made by knative-fleet (made beforehand, copied or ` +
            `restored?): annotate it ${ADOPT_ROLLOUT_KEY_ANNOTATION}=<why> to use it as the key, or delete it`,
        };
      }
      secret = await this.#adopt(found.secret, found.adoptWhy);
    } else secret = found.secret;
    const last = (secret.data as Record<string, string> | undefined)?.[ROLLOUT_KEY_SECRET_LAST];
    const key = keyBytes(secret, where);
    this.#last = last ? Buffer.from(last, "base64").toString("utf8") : undefined;
    this.#key = key;
    return key;
  }

  #keySecret(): KeySecret {
    return {
      namespace: this.#options.keyNamespace,
      name: ROLLOUT_KEY_SECRET,
      dataKey: ROLLOUT_KEY_SECRET_KEY,
      markAnnotation: ROLLOUT_KEY_MARK_ANNOTATION,
      adoptAnnotation: ADOPT_ROLLOUT_KEY_ANNOTATION,
    };
  }

  /** A person adopted a key Secret knative-fleet did not make: logged, an Event, and marked (one act). */
  async #adopt(secret: KubeObject, why: string): Promise<KubeObject> {
    const { keyNamespace, namespace, log, events } = this.#options;
    const name = `${keyNamespace}/${ROLLOUT_KEY_SECRET}`;
    log.warn(
      { secret: name, why },
      "a rollout key Secret knative-fleet did not make is adopted, as a person asked",
    );
    void events.record(
      stateObject(namespace),
      "Warning",
      "RolloutKeyAdopted",
      `the rollout key Secret ${name}, which knative-fleet did not make, is adopted (${why || "no reason given"})`,
    );
    return markKeySecret(this.#options.hub, this.#keySecret(), secret);
  }

  /** A refused key: every change waits; logged and recorded as an Event once per reason. */
  #refuseKey(reason: string): OpenedStore {
    if (this.#keyRefusal !== reason) {
      this.#keyRefusal = reason;
      this.#options.log.error({ reason }, "the rollout key is refused; every change waits");
      void this.#options.events.record(
        stateObject(this.#options.namespace),
        "Warning",
        "RolloutKeyRefused",
        reason,
      );
    }
    return { kind: "keyRefused", reason };
  }

  /** Records in the key Secret the HMAC of the last state stored (the only write there after its key). */
  async #recordLast(mac: string): Promise<void> {
    const { hub, keyNamespace } = this.#options;
    await hub.mergePatch("v1", "Secret", keyNamespace, ROLLOUT_KEY_SECRET, {
      data: { [ROLLOUT_KEY_SECRET_LAST]: Buffer.from(mac, "utf8").toString("base64") },
    });
    this.#last = mac;
  }
}
