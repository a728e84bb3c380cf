/**
 * How long staging takes (pure): the bytes that cross the slow link at its rate, and the busiest
 * node's pulls one by one (each its fixed cost), laid over the
 * staging windows (nothing starts while they are shut), as `wait` paces its own ETA (pending
 * bytes at the rate); on MCO no sooner than its daemons' own pace (mco/pace.ts). Checked against
 * the first window staging gets: the one open now, or the next.
 */
import type { PreflightEta } from '../../api/preflight.js';
import { windowGate, type StagingSchedule } from '../../api/staging.js';
import { formatBytes, formatRate, formatSeconds } from '../../units.js';

/**
 * What a pull costs prestage's agents besides its bytes, under a cap: a node pulls one image at a
 * time, and each waits on its ledger charge (Lease writes), CRI-O's manifest and config reads and
 * its commit. Measured on the test bed through the link relay at 1 MiB/s: a release's 146 small
 * images on the control-plane node took 18.7 s beyond their bytes at the cap (test/preflight.test.ts:
 * 44 s against 25.3 s), 0.13 s an image. Over a link with a long round trip it costs more.
 */
export const AGENT_PULL_SECONDS = 0.13;

/** A schedule is a daily dial: a year of windows is more than any stage takes. */
const MAX_WINDOWS = 2 * 366;

export interface EtaInput {
  readonly linkBytes: number;
  readonly bytesPerSecond: number;
  readonly rateFrom: PreflightEta['rateFrom'];
  /** Images the busiest node pulls one after another, each AGENT_PULL_SECONDS besides its bytes (0 on MCO: its own pace is the floor). */
  readonly serialImages: number;
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

export function stagingEta({ linkBytes, bytesPerSecond, rateFrom, serialImages, floorSeconds = 0, schedule, now }: EtaInput): EtaResult {
  const pullSeconds = serialImages * AGENT_PULL_SECONDS;
  const seconds = Math.max(linkBytes / bytesPerSecond + pullSeconds, floorSeconds);
  const base = { seconds: Math.round(seconds), bytesPerSecond, rateFrom, pullSeconds: Math.round(pullSeconds) };
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
    reason: `staging needs ${formatSeconds(seconds)} (${formatBytes(linkBytes)} over the link at ${formatRate(bytesPerSecond)}${pullSeconds ? `, and ${formatSeconds(pullSeconds)} of pulls one by one on the busiest node` : ''}), the window ${iso(opens)} to ${iso(closes)} leaves ${formatSeconds(room)}: short by ${formatSeconds(seconds - room)}; raise --link-rate, stage through the cache, or start in an earlier window`,
  };
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');
}
