import type { FleetFileFilter } from "../fleet/select.ts";
import type { Logger } from "../observability/log.ts";
import { createWebhookHandler } from "../source/index.ts";
import { type RunningHttpServer, serveRoutes } from "./http-server.ts";

interface PushListenerOptions {
  port: number;
  host: string;
  /** The file holding the webhook secret (read on every delivery). */
  secretFile: string;
  /** The source branch: pushes to other branches are ignored. */
  branch: string;
  /** The source's file filter: a push that changes no fleet file is ignored. */
  filter: FleetFileFilter;
  /** A push that may change the fleet: sync now. */
  onPush(): void;
  /** Whether this replica leads: a standby leaves the change to the leader. */
  isLeading(): boolean;
  log: Logger;
}

/**
 * The push webhook's listener (POST /webhook); a standby checks a delivery, answers 202 and leaves the
 * change to the leader.
 */
export function listenForPushes(options: PushListenerOptions): Promise<RunningHttpServer> {
  const { isLeading, log } = options;
  const handler = createWebhookHandler({
    secret: { file: options.secretFile },
    branch: options.branch,
    filter: options.filter,
    onPush: () => options.onPush(),
    // A standby checks a delivery as the leader does, so a wrong secret is refused by every replica.
    standby: () => (isLeading() ? undefined : "not the leader; the leader's next poll picks the change up"),
    onError: (err) => log.error({ err: String(err) }, "webhook delivery failed"),
  });
  const webhook = { methods: new Set(["POST"]), handle: handler };
  return serveRoutes({
    port: options.port,
    host: options.host,
    routes: new Map([["/webhook", webhook]]),
    log,
  });
}
