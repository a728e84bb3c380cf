/**
 * URLs as messages may show them: never a `user:password@` (a proxy from `https_proxy`, a
 * `--signature-store`, a registry's realm or redirect may carry one).
 */

/** `url` with any userinfo replaced by `***`; text that is no URL is redacted as best it can be. */
export function redactUrl(url: URL | string): string {
  const text = String(url);
  try {
    const parsed = new URL(text);
    if (!parsed.username && !parsed.password) return text; // as given: a message quotes the user's own spelling
    parsed.username = '';
    parsed.password = '';
    return parsed.href.replace('//', '//***@');
  } catch {
    // Not parseable (a bad proxy variable): drop everything between `//` and the last `@` before the path.
    return text.replace(/\/\/[^/?#]*@/, '//***@');
  }
}

/** Every URL inside `text` (a message) with its userinfo replaced. */
export function redactUrls(text: string): string {
  return text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^/?#@\s]*@/gi, (m) => m.replace(/\/\/[^/?#@\s]*@/, '//***@'));
}

/** True when the URL names a user or password. */
export function hasUserinfo(url: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\/[^/?#@]*@/i.test(url.trim());
}
