/**
 * `--window`, `--window-tz`, `--window-strict` and the link cap for `stage` and `apply`: stored
 * on the sets as annotations (`api/staging.ts`) so the agents honour them across restarts.
 * MCO pulls a set as soon as a pool selects it and cannot be held to a window or a rate: on its
 * backend a window is refused and `--link-rate` only feeds wait's predicted pace.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Argv } from 'yargs';
import type { BackendKind, DesiredSet } from '../cluster/backend.js';
import { checkTimeZone, LINK_RATE_ANNOTATION, parseWindow, scheduleAnnotations, windowGate, type StagingSchedule } from '../api/staging.js';
import { planLinkMeter } from '../agent/plan-link-meter.js';
import { MemoryLinkLedger } from '../agent/link-share.js';
import { LedgerMeter } from '../net/link-meter.js';
import { BadInputError } from '../errors.js';

export interface StagingFlags {
  window?: string[];
  'window-tz'?: string;
  'window-strict'?: boolean;
  'link-rate'?: number;
}

export function withStagingOptions<T>(y: Argv<T>): Argv<T & StagingFlags> {
  return y
    .option('window', {
      type: 'string',
      array: true,
      describe: 'Staging window HH:MM-HH:MM (repeatable; 22:00-06:00 wraps past midnight): outside every window no new pull starts; stored on the sets, so agents keep to it across restarts (prestage agent only)',
    })
    .option('window-tz', { type: 'string', describe: 'Time zone of the windows, an IANA name [default: $TZ, else this machine\'s zone]' })
    .option('window-strict', { type: 'boolean', default: false, describe: 'At a window\'s close, stop the pulls under way too (they start again in the next window)' }) as unknown as Argv<T & StagingFlags>;
}

/** The schedule the flags give; undefined without `--window`. Bad input throws before any cluster work. */
export function scheduleFrom(flags: StagingFlags): StagingSchedule | undefined {
  const windows = (flags.window ?? []).flatMap((value) => String(value).split(',')).filter((text) => text.trim() !== '');
  if (windows.length === 0) {
    if (flags['window-tz'] !== undefined || flags['window-strict']) throw new BadInputError(`--${flags['window-tz'] !== undefined ? 'window-tz' : 'window-strict'} needs --window HH:MM-HH:MM`);
    return undefined;
  }
  const zone = flags['window-tz'] ?? process.env.TZ ?? Intl.DateTimeFormat().resolvedOptions().timeZone;
  return { windows: windows.map((text) => parseWindow(text)), timeZone: checkTimeZone(zone, flags['window-tz'] !== undefined ? '--window-tz' : 'TZ'), strict: flags['window-strict'] === true };
}

/**
 * The sets with the cap and windows as annotations. Without them the annotations are absent, so
 * a later `stage` without `--window` lifts an earlier one (server-side apply drops what it no longer sets).
 */
export function withStaging(sets: readonly DesiredSet[], schedule: StagingSchedule | undefined, rate: number | undefined, backend: BackendKind, warn: (line: string) => void): DesiredSet[] {
  if (backend === 'mco') {
    if (schedule) throw new BadInputError('--window: MCO pulls a set as soon as a pool selects it and keeps no staging windows; run prestage pause before the window closes and prestage resume when it opens, or install prestage\'s agent (install --apply)');
    if (rate !== undefined) warn('--link-rate on MCO: the rate predicts its pace; MCO cannot be capped (each node pulls as fast as the link allows)');
    return [...sets];
  }
  const annotations = { ...(schedule ? scheduleAnnotations(schedule) : {}), ...(rate !== undefined ? { [LINK_RATE_ANNOTATION]: String(Math.round(rate)) } : {}) };
  return sets.map((set) => ({ ...set, annotations: { ...set.annotations, ...annotations } }));
}

/** How often a held plan looks at the clock again while its windows are shut (the clock may be set meanwhile). */
const WINDOW_RECHECK_MS = 10_000;

/**
 * A capped stage's own reads keep to its windows as the agents' do: while every window is shut,
 * a read waits for the opening (one line says so, once), so nothing crosses the link outside
 * them. `now` and `wait` are injected for tests.
 */
export function windowHold(schedule: StagingSchedule, say: (line: string) => void, now: () => number = Date.now, wait: (ms: number, signal?: AbortSignal) => Promise<unknown> = (ms, signal) => sleep(ms, undefined, signal ? { signal } : {})): (signal?: AbortSignal) => Promise<void> {
  let said = false;
  return async (signal) => {
    for (;;) {
      const gate = windowGate(schedule, now());
      if (gate.open) return;
      if (!said) {
        said = true;
        say(`--window: the staging windows are shut; the plan's reads over the link wait for the opening (${gate.note})`);
      }
      await wait(Math.min(Math.max((gate.opensAt ?? 0) - now(), 1_000), WINDOW_RECHECK_MS), signal);
    }
  };
}

/**
 * Under a cap on the agent backend, where the plan's own reads pay: the agents' ledger (a dry
 * run's reads on one of their own, writing nothing), held to the windows. Undefined without a cap.
 */
export async function planReadsMeter(client: Parameters<typeof planLinkMeter>[0], backend: BackendKind, rate: number | undefined, schedule: StagingSchedule | undefined, dryRun: boolean, warn: (line: string) => void, log: Logger): Promise<LedgerMeter | undefined> {
  if (backend !== 'agent' || rate === undefined) return undefined;
  const gate = schedule ? { gate: windowHold(schedule, warn) } : {};
  return dryRun ? new LedgerMeter(new MemoryLinkLedger(), rate, gate) : await planLinkMeter(client, rate, warn, log, gate);
}
