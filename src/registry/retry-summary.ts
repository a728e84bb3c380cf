/**
 * Retries counted per registry and cause, reported once the work is done as one line per
 * registry (`quay.io: 12 retries (HTTP 429 x8, ECONNRESET x4)`) instead of a line per retry:
 * a run that fails prints only its fatal error, and a run that succeeds says what it survived.
 */
import type { RetryEvent } from './transport.js';

export class RetrySummary {
  private readonly byRegistry = new Map<string, Map<string, number>>();

  record(event: RetryEvent): void {
    let causes = this.byRegistry.get(event.registry);
    if (!causes) this.byRegistry.set(event.registry, (causes = new Map()));
    const cause = causeOf(event.reason);
    causes.set(cause, (causes.get(cause) ?? 0) + 1);
  }

  lines(): string[] {
    return [...this.byRegistry].map(([registry, causes]) => {
      const total = [...causes.values()].reduce((a, b) => a + b, 0);
      const detail = [...causes].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([cause, n]) => `${cause} x${n}`).join(', ');
      return `${registry}: ${total} ${total === 1 ? 'retry' : 'retries'} (${detail})`;
    });
  }
}

/** `HTTP 429 (TOOMANYREQUESTS: slow down)` → `HTTP 429`; `connection error ECONNRESET at byte 5` → `ECONNRESET`. */
function causeOf(reason: string): string {
  const status = /^HTTP \d+/.exec(reason);
  if (status) return status[0];
  const code = /connection error (\w+)/.exec(reason);
  if (code) return code[1]!;
  return reason.replace(/ at byte \d+$/, '');
}
