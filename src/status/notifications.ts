import { z } from "zod";
import type { RolloutReport } from "../rollout/edge.ts";
import { rolloutName, rolloutVerdict } from "../rollout/state.ts";
import { commitInMessage } from "../text/commit.ts";
import type { HubCrRow } from "./row.ts";

// What people are told, pure: the transitions between two readings of the fleet (the rollout's report of
// two syncs, the hub CRs' rows of two runs), never a state as such, so a message says what happened once.
// A cluster is "unhealthy" only after it stayed so for a while: a CR that flaps during an install is no
// message. The formats are the receivers': a generic JSON body, Slack's and Microsoft Teams' incoming
// webhooks.

export const NotificationEventSchema = z.enum([
  "RolloutStarted",
  "WaveOpened",
  "WaitingForApproval",
  "RolloutHalted",
  "RolloutReverted",
  "RolloutCompleted",
  "ClusterUnhealthy",
  "ClusterRecovered",
]);
export type NotificationEvent = z.infer<typeof NotificationEventSchema>;

export const NotificationFormatSchema = z.enum(["generic", "slack", "teams"]);
type NotificationFormat = z.infer<typeof NotificationFormatSchema>;

export interface Notification {
  event: NotificationEvent;
  severity: "info" | "warning";
  /** The fleet's name (the same as in the commit statuses' contexts). */
  fleet: string;
  /** The commit of the rollout it is about. */
  commit?: string;
  wave?: string;
  cluster?: string;
  /** One sentence for people. */
  text: string;
  /** What suppresses a repeat within the minimum interval: the event and what it is about. */
  key: string;
}

/** A reading of the fleet: the rollout's report, and each cluster's health with since when. */
export interface FleetReading {
  rollout?: RolloutReport;
  /** Per cluster (`namespace/name`): not healthy since (ms), or undefined when healthy. */
  unhealthySince: Map<string, number | undefined>;
  /** When it was read (ms). */
  at: number;
}

/** The reading of a run: the clusters' health carried on from the last reading, so `since` is kept. */
export function readFleet(
  rollout: RolloutReport | undefined,
  rows: readonly HubCrRow[],
  last: FleetReading | undefined,
  now: number,
): FleetReading {
  const healthy = new Map<string, boolean>();
  for (const row of rows) {
    if (row.cluster === "hub") continue;
    healthy.set(row.cluster, (healthy.get(row.cluster) ?? true) && row.phase === "Current");
  }
  const unhealthySince = new Map<string, number | undefined>();
  for (const [cluster, ok] of healthy) {
    unhealthySince.set(cluster, ok ? undefined : (last?.unhealthySince.get(cluster) ?? now));
  }
  return { ...(rollout && { rollout }), unhealthySince, at: now };
}

/**
 * What happened between two readings. The first reading of a leader tells nothing (it cannot know what
 * its predecessor told). A cluster is reported unhealthy once it stayed so for `unhealthyAfterMs`.
 */
export function notificationsBetween(
  last: FleetReading | undefined,
  next: FleetReading,
  options: { fleet: string; unhealthyAfterMs: number },
): Notification[] {
  if (last === undefined) return [];
  const { fleet } = options;
  const out: Notification[] = [];
  const say: Say = (n, about) => out.push({ ...n, fleet, key: `${n.event} ${about}` });
  rolloutTransitions(last.rollout, next.rollout, say);
  clusterTransitions(last, next, options.unhealthyAfterMs, say);
  return out;
}

type Say = (n: Omit<Notification, "fleet" | "key">, about: string) => void;

/** The rollout's moves between two reports: started, a wave opened or waiting for approval, halted, ... */
function rolloutTransitions(before: RolloutReport | undefined, after: RolloutReport | undefined, say: Say) {
  if (after?.commit) {
    const name = rolloutName({ commit: after.commit });
    const commit = after.commit;
    if (after.commit !== before?.commit && after.phase === "Progressing") {
      say({ event: "RolloutStarted", severity: "info", commit, text: `${name} started` }, commit);
    }
    if (
      after.wave &&
      after.opened &&
      (after.wave !== before?.wave || !before.opened || after.commit !== before.commit)
    ) {
      say(
        {
          event: "WaveOpened",
          severity: "info",
          commit,
          wave: after.wave,
          text: `${name}: wave ${after.wave} is open`,
        },
        `${commit} ${after.wave}`,
      );
    }
    const approval = after.approval;
    if (
      approval &&
      (approval.wave !== before?.approval?.wave || approval.commit !== before.approval.commit)
    ) {
      say(
        {
          event: "WaitingForApproval",
          severity: "info",
          commit,
          wave: approval.wave,
          text: rolloutVerdict(after).message,
        },
        `${commit} ${approval.wave}`,
      );
    }
    if (after.phase === "Halted" && (before?.phase !== "Halted" || before.commit !== after.commit)) {
      say(
        {
          event: "RolloutHalted",
          severity: "warning",
          commit,
          ...(after.halt && { wave: after.halt.wave, cluster: after.halt.cluster }),
          text: rolloutVerdict(after).message,
        },
        commit,
      );
    }
    if (after.reverted && after.reverted.length > 0) {
      const shown = after.reverted.slice(0, 5).join(", ");
      const more = after.reverted.length > 5 ? ` and ${after.reverted.length - 5} more` : "";
      say(
        {
          event: "RolloutReverted",
          severity: "warning",
          commit,
          text: `${name}: put back on the last completed rollout's content: ${shown}${more}`,
        },
        `${commit} reverted`,
      );
    }
    if (after.phase === "Complete" && (before?.phase !== "Complete" || before.commit !== after.commit)) {
      say(
        { event: "RolloutCompleted", severity: "info", commit, text: `${name} has reached every wave` },
        commit,
      );
    }
  }
}

/** A cluster unhealthy for `unhealthyAfterMs` by now (and not at the last reading), or healthy again. */
function clusterTransitions(last: FleetReading, next: FleetReading, unhealthyAfterMs: number, say: Say) {
  const due = (since: number | undefined, at: number) =>
    since !== undefined && at - since >= unhealthyAfterMs;
  for (const [cluster, since] of next.unhealthySince) {
    const was = due(last.unhealthySince.get(cluster), last.at);
    const minutes = Math.round(unhealthyAfterMs / 60_000);
    if (due(since, next.at) && !was) {
      say(
        {
          event: "ClusterUnhealthy",
          severity: "warning",
          cluster,
          text: `cluster ${cluster} has not been healthy for ${minutes > 0 ? `${minutes} min` : "a while"}`,
        },
        cluster,
      );
    } else if (since === undefined && was) {
      say(
        { event: "ClusterRecovered", severity: "info", cluster, text: `cluster ${cluster} is healthy again` },
        cluster,
      );
    }
  }
}

/** The body a receiver of `format` takes. */
export function notificationBody(n: Notification, format: NotificationFormat): unknown {
  const title = `knative-fleet ${n.fleet}: ${n.event}`;
  switch (format) {
    case "generic":
      return {
        event: n.event,
        severity: n.severity,
        fleet: n.fleet,
        ...(n.commit && { commit: n.commit }),
        ...(n.wave && { wave: n.wave }),
        ...(n.cluster && { cluster: n.cluster }),
        text: n.text,
      };
    case "slack":
      // Slack's incoming webhooks: `text` is the notification (and the fallback); mrkdwn escapes <, > and &.
      return { text: `*${escapeSlack(title)}*\n${escapeSlack(n.text)}` };
    case "teams":
      // A Teams workflow webhook takes an Adaptive Card in a message's attachments.
      return {
        type: "message",
        attachments: [
          {
            contentType: "application/vnd.microsoft.card.adaptive",
            content: {
              $schema: "http://adaptivecards.io/schemas/adaptive-card.json",
              type: "AdaptiveCard",
              version: "1.4",
              body: [
                {
                  type: "TextBlock",
                  text: title,
                  weight: "Bolder",
                  wrap: true,
                  ...(n.severity === "warning" && { color: "Attention" }),
                },
                { type: "TextBlock", text: n.text, wrap: true },
                ...(n.commit
                  ? [{ type: "TextBlock", text: `commit ${commitInMessage(n.commit)}`, isSubtle: true }]
                  : []),
              ],
            },
          },
        ],
      };
  }
}

const escapeSlack = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
