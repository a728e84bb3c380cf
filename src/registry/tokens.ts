/**
 * Bearer tokens by realm, service and scope: one fetch at a time per key, kept until shortly
 * before they expire. A token claiming to live under 60 s is kept 60 s (FACTS §2: registries
 * answer `expires_in` of a few seconds, or none).
 */

/** Tokens that claim to live less than this are treated as living this long. */
export const MIN_TOKEN_SECONDS = 60;
/** Renewed this long before expiry, so a token does not expire in flight. */
const RENEW_EARLY_SECONDS = 10;

export interface IssuedToken {
  readonly token: string;
  /** `expires_in` as the token service sent it (any JSON value). */
  readonly expiresIn?: unknown;
}

export class TokenCache {
  private readonly tokens = new Map<string, { token: string; expiresAt: number }>();
  private readonly pending = new Map<string, Promise<string>>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The cached token for `key`, or a fresh one from `fetch` (always fresh with `fresh`). */
  get(key: string, fetch: () => Promise<IssuedToken>, fresh = false): Promise<string> {
    const cached = this.tokens.get(key);
    if (!fresh && cached && cached.expiresAt > this.now()) return Promise.resolve(cached.token);
    const running = this.pending.get(key);
    if (running) return running;
    const p = fetch()
      .then(({ token, expiresIn }) => {
        const lifetime = Math.max(MIN_TOKEN_SECONDS, Number(expiresIn) || MIN_TOKEN_SECONDS);
        this.tokens.set(key, { token, expiresAt: this.now() + (lifetime - RENEW_EARLY_SECONDS) * 1000 });
        return token;
      })
      .finally(() => this.pending.delete(key));
    this.pending.set(key, p);
    return p;
  }
}
