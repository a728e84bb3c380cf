import { describe, expect, it } from 'vitest';
import { RegistryError } from '../errors.js';
import { MAX_RETRY_AFTER_MS, parseRetryAfter, RetryableStatus, RetryBudget, retryDelayMs, retrying, transientReason, type RetryHooks, type RetryNotice } from './retry.js';

const reset = (): Error => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });

function hooks(attempts: number, notices: RetryNotice[] = []): RetryHooks {
  return {
    policy: { attempts, baseDelayMs: 1, maxDelayMs: 4 },
    onRetry: (n) => notices.push(n),
    exhausted: (reason, spent) => new RegistryError(`${reason} after ${spent} attempts`),
    fatal: (err) => new RegistryError(`fatal: ${(err as Error).message}`),
  };
}

describe('Retry-After', () => {
  it('reads delta-seconds and HTTP dates', () => {
    expect(parseRetryAfter('3')).toBe(3000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});

describe('retry delays', () => {
  const policy = { attempts: 10, baseDelayMs: 500, maxDelayMs: 30_000 };
  it('jitters over a doubling window, capped', () => {
    expect(retryDelayMs(policy, 1, undefined, () => 1)).toBe(500);
    expect(retryDelayMs(policy, 3, undefined, () => 1)).toBe(2000);
    expect(retryDelayMs(policy, 20, undefined, () => 1)).toBe(30_000);
    expect(retryDelayMs(policy, 3, undefined, () => 0.25)).toBe(500);
  });
  it('waits what Retry-After asks, capped, plus a tenth of the jitter', () => {
    expect(retryDelayMs(policy, 1, 7000, () => 1)).toBe(7050);
    expect(retryDelayMs(policy, 1, 3_600_000, () => 0)).toBe(MAX_RETRY_AFTER_MS);
  });
});

describe('what is transient', () => {
  it('429, 5xx, resets and stalls; not a verdict that wraps one', () => {
    expect(transientReason(new RetryableStatus(429, undefined, ''))).toBe('HTTP 429');
    expect(transientReason(reset())).toBe('connection error ECONNRESET');
    expect(transientReason(new Error('x', { cause: Object.assign(new Error('t'), { code: 'UND_ERR_BODY_TIMEOUT' }) }))).toBe('stalled transfer');
    expect(transientReason(new RegistryError('gave up after 5 attempts', { cause: reset() }))).toBeUndefined();
    expect(transientReason(new Error('not found'))).toBeUndefined();
  });
});

describe('retrying', () => {
  it('spends the attempts, announcing only retries that follow', async () => {
    const notices: RetryNotice[] = [];
    let calls = 0;
    await expect(retrying(hooks(3, notices), async () => { calls++; throw new RetryableStatus(503, undefined, ''); })).rejects.toThrow('HTTP 503 after 3 attempts');
    expect(calls).toBe(3);
    expect(notices.map((n) => n.retry)).toEqual([1, 2]);
  });
  it('with one attempt (--retries 0) fails at once, announcing no retry', async () => {
    const notices: RetryNotice[] = [];
    await expect(retrying(hooks(1, notices), async () => { throw reset(); })).rejects.toThrow('connection error ECONNRESET after 1 attempts');
    expect(notices).toEqual([]);
  });
  it('does not retry what is not transient, nor an error that already spent its attempts', async () => {
    let calls = 0;
    await expect(retrying(hooks(5), async () => { calls++; throw new Error('bad manifest'); })).rejects.toThrow('fatal: bad manifest');
    const inner = new RegistryError('x: connection error ECONNRESET after 5 attempts', { cause: reset() });
    await expect(retrying(hooks(5), async () => { calls++; throw inner; })).rejects.toBe(inner);
    expect(calls).toBe(2);
  });
  it('returns the first success', async () => {
    let calls = 0;
    expect(await retrying(hooks(5), async (n) => { calls++; if (n < 3) throw reset(); return n; })).toBe(3);
    expect(calls).toBe(3);
  });
});

describe('body reads count progress', () => {
  it('reconnects without spending an attempt after progress, and gives up on failures without', async () => {
    const notices: RetryNotice[] = [];
    const budget = new RetryBudget(hooks(2, notices));
    for (let i = 0; i < 10; i++) await budget.failed(reset(), true);
    await budget.failed(reset(), false);
    await expect(budget.failed(reset(), false)).rejects.toThrow('after 2 attempts');
    expect(notices).toHaveLength(11);
  });
  it('stops waiting when its owner closes', async () => {
    const closing = new AbortController();
    const budget = new RetryBudget({ ...hooks(3), policy: { attempts: 3, baseDelayMs: 60_000, maxDelayMs: 60_000 }, signal: closing.signal });
    const waiting = budget.failed(new RetryableStatus(503, 60_000, ''));
    closing.abort();
    await expect(waiting).rejects.toThrow(/abort/i);
  });
});
