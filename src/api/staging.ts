/**
 * When and how fast a set may be staged, as annotations on the set itself, so every agent
 * honours them across restarts and a GitOps repository can carry them:
 *
 * - `prestage.dev/link-rate`: bytes per second the slow link may carry for pulls, cluster-wide
 *   (the agents share it out through their pull-slot Leases);
 * - `prestage.dev/staging-windows`: `HH:MM-HH:MM[,HH:MM-HH:MM…]` wall-clock windows (an end
 *   before its start wraps past midnight) in `prestage.dev/staging-window-tz` (IANA, default
 *   UTC): outside them no pull starts; pulls under way finish, or with
 *   `prestage.dev/staging-window-strict: "true"` are stopped at the close;
 * - `prestage.dev/paused`: `prestage pause` wrote it (the time); no pull starts until `resume`.
 */
import { BadInputError } from '../errors.js';

export const LINK_RATE_ANNOTATION = 'prestage.dev/link-rate';
export const WINDOWS_ANNOTATION = 'prestage.dev/staging-windows';
export const WINDOW_TZ_ANNOTATION = 'prestage.dev/staging-window-tz';
export const WINDOW_STRICT_ANNOTATION = 'prestage.dev/staging-window-strict';
export const PAUSED_ANNOTATION = 'prestage.dev/paused';
/** MCO backend: the pool role label a paused set had (MCO pulls every set a pool selects; pausing unselects it). */
export const PAUSED_ROLE_ANNOTATION = 'prestage.dev/paused-role';

/** Minutes since local midnight: [start, end), end < start wraps past midnight. */
export interface StagingWindow {
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

export interface StagingSchedule {
  readonly windows: readonly StagingWindow[];
  readonly timeZone: string;
  readonly strict: boolean;
}

/** Whether a set may start pulls now, and if not until when. */
export type Gate =
  | { readonly open: true; /** A window's close (ms since epoch); absent without windows. */ readonly closesAt?: number; readonly strict?: boolean }
  | { readonly open: false; readonly why: 'paused' | 'window'; /** The next window's opening (ms since epoch). */ readonly opensAt?: number; readonly note: string };

const TIME = /^([01]?\d|2[0-3]):([0-5]\d)$/;

/** `22:00-06:00` → a window; a bad one is a one-line BadInputError naming `source`. */
export function parseWindow(text: string, source = '--window'): StagingWindow {
  const [from, to, extra] = text.trim().split('-');
  const start = from === undefined ? undefined : TIME.exec(from.trim());
  const end = to === undefined ? undefined : TIME.exec(to.trim());
  if (!start || !end || extra !== undefined) throw new BadInputError(`${source}: bad window ${JSON.stringify(text)}: use HH:MM-HH:MM in 24-hour time, e.g. 22:00-06:00`);
  const window = { start: Number(start[1]) * 60 + Number(start[2]), end: Number(end[1]) * 60 + Number(end[2]) };
  if (window.start === window.end) throw new BadInputError(`${source}: window ${JSON.stringify(text)} has zero length; give a start and an end that differ (22:00-06:00 wraps past midnight)`);
  return { ...window, text: `${clock(window.start)}-${clock(window.end)}` };
}

/** An IANA time zone the runtime knows, or a one-line BadInputError. */
export function checkTimeZone(timeZone: string, source = '--window-tz'): string {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone }).resolvedOptions().timeZone;
  } catch {
    throw new BadInputError(`${source}: unknown time zone ${JSON.stringify(timeZone)}: use an IANA name such as UTC, Europe/Paris or America/New_York`);
  }
}

/** The annotations a schedule is stored as. */
export function scheduleAnnotations(schedule: StagingSchedule): Record<string, string> {
  return {
    [WINDOWS_ANNOTATION]: schedule.windows.map((w) => w.text).join(','),
    [WINDOW_TZ_ANNOTATION]: schedule.timeZone,
    ...(schedule.strict ? { [WINDOW_STRICT_ANNOTATION]: 'true' } : {}),
  };
}

/** A set's schedule from its annotations; undefined without windows. Bad annotations throw (the agent reports them on the set). */
export function scheduleOf(annotations: Readonly<Record<string, string>> | undefined): StagingSchedule | undefined {
  const text = annotations?.[WINDOWS_ANNOTATION];
  if (!text?.trim()) return undefined;
  return {
    windows: text.split(',').map((part) => parseWindow(part, `annotation ${WINDOWS_ANNOTATION}`)),
    timeZone: checkTimeZone(annotations?.[WINDOW_TZ_ANNOTATION] || 'UTC', `annotation ${WINDOW_TZ_ANNOTATION}`),
    strict: annotations?.[WINDOW_STRICT_ANNOTATION] === 'true',
  };
}

/** A set's link cap (bytes/s) from its annotation; undefined when absent or not a positive number. */
export function linkRateOf(annotations: Readonly<Record<string, string>> | undefined): number | undefined {
  const rate = Number(annotations?.[LINK_RATE_ANNOTATION]);
  return Number.isFinite(rate) && rate > 0 ? rate : undefined;
}

/** Whether a set with these annotations may start pulls at `now`. */
export function gateOf(annotations: Readonly<Record<string, string>> | undefined, now: number): Gate {
  if (annotations?.[PAUSED_ANNOTATION] !== undefined) return { open: false, why: 'paused', note: `paused by prestage pause at ${annotations[PAUSED_ANNOTATION]}; prestage resume to go on` };
  const schedule = scheduleOf(annotations);
  return schedule ? windowGate(schedule, now) : { open: true };
}

/** Open or not at `now` by the schedule's wall clock; when shut, the next opening. */
export function windowGate(schedule: StagingSchedule, now: number): Gate {
  const local = localMinute(now, schedule.timeZone);
  const secondsIn = Math.floor(now / 1000) % 60;
  const at = (minutesAhead: number) => now + minutesAhead * 60_000 - secondsIn * 1000 - (now % 1000);
  const inside = schedule.windows.find((w) => contains(w, local));
  if (inside) return { open: true, closesAt: at(minutesUntil(local, inside.end)), strict: schedule.strict };
  const next = [...schedule.windows].sort((a, b) => minutesUntil(local, a.start) - minutesUntil(local, b.start))[0]!;
  const zone = schedule.timeZone === 'UTC' ? 'UTC' : schedule.timeZone;
  return { open: false, why: 'window', opensAt: at(minutesUntil(local, next.start)), note: `paused until ${clock(next.start)} ${zone} (staging windows ${schedule.windows.map((w) => w.text).join(', ')})` };
}

function contains(window: StagingWindow, minute: number): boolean {
  return window.start < window.end ? minute >= window.start && minute < window.end : minute >= window.start || minute < window.end;
}

/** Minutes from `from` forward to `to` on a 24-hour dial, 1..1440. */
function minutesUntil(from: number, to: number): number {
  return ((to - from + 1440 - 1) % 1440) + 1;
}

const formats = new Map<string, Intl.DateTimeFormat>();

/** Minutes since midnight at `now` on the wall clock of `timeZone` (a DST jump moves the windows with the clock, as a person's would). */
export function localMinute(now: number, timeZone: string): number {
  let format = formats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    formats.set(timeZone, format);
  }
  const parts = format.formatToParts(new Date(now));
  const part = (type: string) => Number(parts.find((p) => p.type === type)?.value ?? 0);
  return part('hour') * 60 + part('minute');
}

function clock(minutes: number): string {
  return `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
}
