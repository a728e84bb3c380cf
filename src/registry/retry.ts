/**
 * The one retry policy for registry traffic: which failures are worth another attempt
 * (throttling, 5xx, resets, stalls), how long to wait (`Retry-After`, else capped exponential
 * backoff with full jitter), and how many attempts a request or a body read may spend.
 *
 * A body read spends an attempt only when a connection broke without real progress since the
 * previous one (containers/image's body reader): a link that keeps delivering megabytes between
 * resets is not a failing link, and one that delivers nothing cannot loop. An error that has
 * spent its attempts is final (a PrestageError): no outer loop retries it again.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { PrestageError } from '../errors.js';

export interface RetryPolicy {
  /** Attempts in all, first one included. */
  readonly attempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 5, baseDelayMs: 500, maxDelayMs: 30_000 };

/** A server asking to wait longer than this is waited this long (then retried or failed). */
export const MAX_RETRY_AFTER_MS = 60_000;
/** Bytes a broken body must have delivered since the last attempt to reconnect without spending one. */
export const MIN_BODY_PROGRESS = 1024 * 1024;

const RETRYABLE_STATUS = new Set([408, 429, 500, 502, 503, 504]);

export function isRetryableStatus(status: number): boolean {
  return RETRYABLE_STATUS.has(status);
}

/** A status worth retrying, with the server's `Retry-After`. */
export class RetryableStatus extends Error {
  constructor(
    readonly status: number,
    readonly retryAfterMs: number | undefined,
    detail: string,
  ) {
    super(`HTTP ${status}${detail ? ` (${detail})` : ''}`);
  }
}

const TRANSIENT_CODES = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'ENETUNREACH', 'EHOSTUNREACH',
  'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT',
]);

/**
 * Why an error is worth retrying, or undefined when it is not. A PrestageError is a verdict
 * (access denied, or attempts already spent), whatever its cause says.
 */
export function transientReason(err: unknown): string | undefined {
  if (err instanceof RetryableStatus) return err.message;
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    if (e instanceof PrestageError) return undefined;
    const code = (e as NodeJS.ErrnoException).code;
    if (code && TRANSIENT_CODES.has(code)) return code === 'UND_ERR_BODY_TIMEOUT' ? 'stalled transfer' : `connection error ${code}`;
  }
  return undefined;
}

/** `Retry-After` as delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The wait before retry `retry` (1 = the first retry): the server's `Retry-After` (capped) plus
 * a little jitter so throttled clients do not return together, else full jitter over
 * `base * 2^(retry-1)` capped at `maxDelayMs`.
 */
export function retryDelayMs(policy: RetryPolicy, retry: number, retryAfterMs?: number, random: () => number = Math.random): number {
  const backoff = random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return Math.round(retryAfterMs !== undefined ? Math.min(retryAfterMs, MAX_RETRY_AFTER_MS) + backoff / 10 : backoff);
}

export interface RetryNotice {
  /** 1 for the first retry. */
  readonly retry: number;
  readonly delayMs: number;
  readonly reason: string;
}

export interface RetryHooks {
  readonly policy: RetryPolicy;
  /** Aborted when the owner closes: a wait for the next attempt ends at once. */
  readonly signal?: AbortSignal | undefined;
  readonly onRetry?: ((notice: RetryNotice) => void) | undefined;
  /** The final error once the attempts are spent on transient failures. */
  readonly exhausted: (reason: string, attempts: number, last: unknown) => PrestageError;
  /** The final error for a failure that is not worth retrying (prestage's own errors pass as they are). */
  readonly fatal: (err: unknown) => PrestageError;
}

/**
 * Attempts of one operation. `failed` either waits out the backoff (the caller tries again) or
 * throws the final error; a retry is announced only when another attempt will follow.
 */
export class RetryBudget {
  private spent = 0;
  private retries = 0;

  constructor(private readonly hooks: RetryHooks) {}

  /** `progressed`: the attempt moved real data, so it does not count against the budget. */
  async failed(err: unknown, progressed = false): Promise<void> {
    const reason = transientReason(err);
    if (reason === undefined) throw err instanceof PrestageError ? err : this.hooks.fatal(err);
    if (!progressed) this.spent++;
    if (this.spent >= this.hooks.policy.attempts) throw this.hooks.exhausted(reason, this.hooks.policy.attempts, err);
    // A reconnect after progress waits little: the link works, a connection broke.
    const delayMs = retryDelayMs(this.hooks.policy, progressed ? 1 : this.spent, err instanceof RetryableStatus ? err.retryAfterMs : undefined);
    this.hooks.onRetry?.({ retry: ++this.retries, delayMs, reason });
    await sleep(delayMs, undefined, this.hooks.signal ? { signal: this.hooks.signal } : {});
  }
}

/** Run `attempt` until it succeeds or the policy gives up. */
export async function retrying<T>(hooks: RetryHooks, attempt: (n: number) => Promise<T>): Promise<T> {
  const budget = new RetryBudget(hooks);
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      await budget.failed(err);
    }
  }
}
