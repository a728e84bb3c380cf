/**
 * URLs as prestage prints and stores them: `user:password@` never leaves the process. One helper
 * for every URL that may carry userinfo (signature stores now; registry URLs may share it).
 */

const USERINFO = /^([a-z][a-z0-9+.-]*:\/\/)[^/?#@]*@/i;

/** `https://user:pass@host/p` → `https://***@host/p`; any other text unchanged. */
export function redactUrl(url: string): string {
  return url.replace(USERINFO, '$1***@');
}

/** Every URL inside `text` (a message) with its userinfo replaced. */
export function redactUrls(text: string): string {
  return text.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^/?#@\s]*@/gi, (m) => m.replace(/\/\/[^/?#@\s]*@/, '//***@'));
}

/** True when the URL names a user or password. */
export function hasUserinfo(url: string): boolean {
  return USERINFO.test(url.trim());
}
