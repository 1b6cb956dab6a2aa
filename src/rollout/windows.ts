import { type RolloutWindow, WEEKDAYS, type Weekday } from "../fleet/rollout-schema.ts";

// Maintenance windows: no wave opens outside them. A window is read in its own time zone (Intl, so daylight
// saving follows the zone's rules); one that ends before it starts runs past midnight into the next day and
// belongs to the day it started on.

interface LocalTime {
  day: Weekday;
  minutes: number;
}

function localTime(now: Date, timeZone: string): LocalTime {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    weekday: "short",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  }).formatToParts(now);
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
