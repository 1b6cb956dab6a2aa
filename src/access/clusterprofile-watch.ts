import type { Logger } from "pino";
import type { KubeClient } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { KubeObject } from "../kube/object.ts";
import type { ClusterProfileResource } from "./clusterprofile-version.ts";
import { causeText } from "./errors.ts";

type ClusterProfileEvent = { type: "upsert"; object: KubeObject } | { type: "delete"; object: KubeObject };

interface WatchedScope {
  informer: Informer;
  namespace: string | undefined;
  /** Resolves at the scope's first list, or its first failure. */
  started: Promise<void>;
}

/**
 * Lists and watches ClusterProfiles on the hub: one informer per allowed namespace (so a namespaced Role is
 * enough), or one for all namespaces. The informers resume after a failure with backoff (kube/informer.ts);
 * `live` says whether the view is current, so readers know when to ask the hub instead.
 */
export class ClusterProfileWatch {
  readonly #scopes: WatchedScope[];
  #stopped = false;

  constructor(
    hub: KubeClient,
    resource: ClusterProfileResource,
    namespaces: readonly string[] | undefined,
    onEvent: (event: ClusterProfileEvent) => void,
    logger: Logger,
  ) {
    const apiVersion = `${resource.group}/${resource.version}`;
    this.#scopes = (namespaces === undefined ? [undefined] : [...namespaces]).map((namespace) => {
      let failedOnce: () => void = () => {};
      const failed = new Promise<void>((resolve) => {
        failedOnce = resolve;
      });
      const informer = new Informer(
        hub,
        apiVersion,
        "ClusterProfile",
        (err) => {
          failedOnce();
          if (this.#stopped) return;
          logger.warn(
            { namespace: namespace ?? "(all)", err: causeText(err) },
            "ClusterProfile watch failed; retrying",
          );
        },
        namespace,
      );
      informer.on((event, object) =>
        onEvent(event === "DELETED" ? { type: "delete", object } : { type: "upsert", object }),
      );
      return { informer, namespace, started: Promise.race([informer.hasSynced(), failed]) };
    });
  }

  /** True while every informer has listed and is watching: its objects are the hub's, a moment late at most. */
  get live(): boolean {
    return !this.#stopped && this.#scopes.every((scope) => scope.informer.current);
  }

  /** Starts every informer; resolves once each has listed or failed (failed ones keep retrying). */
  async start(): Promise<void> {
    for (const scope of this.#scopes) scope.informer.start();
    await Promise.all(this.#scopes.map((scope) => scope.started));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    for (const scope of this.#scopes) scope.informer.stop();
  }
}
