import type { ClusterRef } from "../fleet/identity.ts";
import {
  isTimeZone,
  type RolloutSpec,
  type RolloutWindow,
  WEEKDAYS,
  type Weekday,
} from "../fleet/rollout-schema.ts";
import type { InventoryCluster } from "../placement/inventory.ts";
import { selects } from "./waves.ts";

// Maintenance windows: no wave opens outside the policy's, and no cluster takes new content outside its
// own. A window is read in its own time zone (Intl, so daylight saving follows the zone's rules); one that
// ends before it starts runs past midnight into the next day and belongs to the day it started on.

interface LocalTime {
  day: Weekday;
  minutes: number;
}

/**
 * One formatter per time zone: making one costs far more than using it, and every sync asks for each
 * cluster's windows. Zones are validated before they get here, so the IANA list bounds the cache.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterIn(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat("en-US", {
      timeZone,
      weekday: "short",
      hour: "2-digit",
      minute: "2-digit",
      hourCycle: "h23",
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

function localTime(now: Date, timeZone: string): LocalTime {
  const parts = formatterIn(timeZone).formatToParts(now);
  const part = (type: string) => parts.find((p) => p.type === type)?.value ?? "";
  return { day: part("weekday") as Weekday, minutes: Number(part("hour")) * 60 + Number(part("minute")) };
}

const minutesOf = (time: string): number => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

const previousDay = (day: Weekday): Weekday => WEEKDAYS[(WEEKDAYS.indexOf(day) + 6) % 7]!;

export function inWindow(window: RolloutWindow, now: Date): boolean {
  const { day, minutes } = localTime(now, window.timeZone);
  const startsOn = (d: Weekday) => window.days === undefined || window.days.includes(d);
  const start = minutesOf(window.start);
  const end = minutesOf(window.end);
  if (start < end) return startsOn(day) && minutes >= start && minutes < end;
  // Past midnight: the evening part on a start day, or the morning part after one.
  return (startsOn(day) && minutes >= start) || (startsOn(previousDay(day)) && minutes < end);
}

/** Whether a wave may open now: always without windows, else inside any of them. */
export function windowOpen(windows: readonly RolloutWindow[] | undefined, now: Date): boolean {
  return windows === undefined || windows.some((window) => inWindow(window, now));
}

/** A cluster's window as people read it: `Sat,Sun 02:00-06:00 Europe/Berlin`. */
const describeWindow = (window: RolloutWindow): string =>
  `${window.days?.join(",") ?? "daily"} ${window.start}-${window.end} ${window.timeZone}`;

/**
 * Why a cluster takes no new content now: outside a window of an entry of `clusterWindows` that selects it
 * (each entry that selects it must have one open), or its time zone property names no time zone (read as
 * closed: a window is never guessed open). Undefined when it may change now.
 */
export function clusterWindowClosed(
  spec: RolloutSpec,
  cluster: ClusterRef | undefined,
  known: InventoryCluster | undefined,
  now: Date,
): string | undefined {
  if (cluster === undefined) return undefined;
  for (const entry of spec.clusterWindows ?? []) {
    if (!selects(entry, cluster, known)) continue;
    const property = entry.timeZoneProperty;
    const zone = property === undefined ? undefined : known?.properties.get(property);
    if (zone !== undefined && !formatters.has(zone) && (zone.length > 64 || !isTimeZone(zone))) {
      return `its time zone property ${property} is ${JSON.stringify(zone.slice(0, 64))}, no IANA time zone, so its maintenance windows ${entry.name} cannot be read`;
    }
    const windows = entry.windows.map((window) => ({
      ...window,
      timeZone: window.timeZone ?? zone ?? "UTC",
    }));
    if (!windowOpen(windows, now)) {
      return `outside its maintenance windows ${entry.name} (${windows.map(describeWindow).join("; ")})`;
    }
  }
  return undefined;
}
