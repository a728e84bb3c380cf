/**
 * `WWW-Authenticate` challenges, every header and every challenge in each (RFC 7235 allows
 * several per header, and a registry may offer Negotiate beside Bearer). prestage speaks Bearer
 * and Basic and picks Bearer first, as go-containerregistry's `pickFromMultipleChallenges` does;
 * other schemes are skipped.
 */

export type Challenge =
  | { readonly scheme: 'none' }
  | { readonly scheme: 'basic' }
  | { readonly scheme: 'bearer'; readonly realm: string; readonly service?: string };

interface RawChallenge {
  readonly scheme: string;
  readonly params: Record<string, string>;
}

/** The challenge prestage answers, from the header value(s) of one 401. */
export function pickChallenge(header: string | readonly string[] | undefined): Challenge {
  const all = (typeof header === 'string' ? [header] : (header ?? [])).flatMap(splitChallenges);
  const bearer = all.find((c) => c.scheme === 'bearer' && c.params.realm);
  if (bearer) return { scheme: 'bearer', realm: bearer.params.realm!, ...(bearer.params.service ? { service: bearer.params.service } : {}) };
  if (all.some((c) => c.scheme === 'basic')) return { scheme: 'basic' };
  return { scheme: 'none' };
}

const TOKEN = /\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)/y;
const PARAM = /\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*/y;

/**
 * `Negotiate, Bearer realm="https://a,b",service="s"` → two challenges. A scheme is a token not
 * followed by `=`; its parameters are the `name=value` pairs up to the next scheme (a token68
 * such as Negotiate's `YII=` reads as a parameter of its own scheme, which is skipped anyway).
 */
function splitChallenges(value: string): RawChallenge[] {
  const out: RawChallenge[] = [];
  let current: RawChallenge | undefined;
  let at = 0;
  while (at < value.length) {
    if (value[at] === ',' || value[at] === ' ') {
      at++;
      continue;
    }
    PARAM.lastIndex = at;
    const param = current ? PARAM.exec(value) : null;
    if (param) {
      current!.params[param[1]!.toLowerCase()] = param[2] !== undefined ? param[2].replace(/\\(.)/g, '$1') : (param[3] ?? '');
      at = PARAM.lastIndex;
      continue;
    }
    TOKEN.lastIndex = at;
    const scheme = TOKEN.exec(value);
    if (!scheme) break;
    current = { scheme: scheme[1]!.toLowerCase(), params: {} };
    out.push(current);
    at = TOKEN.lastIndex;
  }
  return out;
}
