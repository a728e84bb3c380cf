/**
 * How long staging takes (pure): the bytes that cross the slow link at its rate, laid over the
 * staging windows (nothing starts while they are shut), as `wait` paces its own ETA (pending
 * bytes at the rate); on MCO no sooner than its daemons' own pace (mco/pace.ts). Checked against
 * the first window staging gets: the one open now, or the next.
 */
import type { PreflightEta } from '../../api/preflight.js';
import { windowGate, type StagingSchedule } from '../../api/staging.js';
import { formatBytes, formatRate, formatSeconds } from '../../units.js';

/** A schedule is a daily dial: a year of windows is more than any stage takes. */
const MAX_WINDOWS = 2 * 366;

export interface EtaInput {
  readonly linkBytes: number;
  readonly bytesPerSecond: number;
  readonly rateFrom: PreflightEta['rateFrom'];
  /** At least this long, whatever the bytes (MCO's daemons pause and inspect per image). */
  readonly floorSeconds?: number;
  readonly schedule?: StagingSchedule;
  readonly now: number;
}

export interface EtaResult {
  readonly eta: PreflightEta;
  /** Why the stage does not fit its window; absent when it does or no window was given. */
  readonly reason?: string;
}

export function stagingEta({ linkBytes, bytesPerSecond, rateFrom, floorSeconds = 0, schedule, now }: EtaInput): EtaResult {
  const seconds = Math.max(linkBytes / bytesPerSecond, floorSeconds);
  const base = { seconds: Math.round(seconds), bytesPerSecond, rateFrom };
  if (!schedule) return { eta: { ...base, doneBy: iso(now + seconds * 1000) } };
  let left = seconds * 1000;
  let at = now;
  let doneAt: number | undefined;
  for (let i = 0; i < MAX_WINDOWS && doneAt === undefined; i++) {
    const gate = windowGate(schedule, at);
    if (!gate.open) {
      at = gate.opensAt!;
      continue;
    }
    const span = gate.closesAt! - at;
    if (left <= span) doneAt = at + left;
    else {
      left -= span;
      at = gate.closesAt!;
    }
  }
  const first = windowGate(schedule, now);
  const opens = first.open ? now : first.opensAt!;
  const closes = first.open ? first.closesAt! : (windowGate(schedule, opens) as { closesAt: number }).closesAt;
  const fits = doneAt !== undefined && doneAt <= closes;
  const eta: PreflightEta = { ...base, doneBy: doneAt === undefined ? 'never' : iso(doneAt), window: { opens: iso(opens), closes: iso(closes), fits } };
  if (fits) return { eta };
  const room = (closes - opens) / 1000;
  return {
    eta,
    reason: `staging needs ${formatSeconds(seconds)} (${formatBytes(linkBytes)} over the link at ${formatRate(bytesPerSecond)}), the window ${iso(opens)} to ${iso(closes)} leaves ${formatSeconds(room)}: short by ${formatSeconds(seconds - room)}; raise --link-rate, stage through the cache, or start in an earlier window`,
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}
