/**
 * A Docker token server (the "realm" of a `WWW-Authenticate: Bearer` challenge), enough for
 * distribution's `auth.token`: it checks Basic credentials and answers with an ES256 JWT
 * whose `x5c` header carries the signing certificate, which is the registry's
 * `rootcertbundle`.
 */
import { createPrivateKey, randomUUID, sign, X509Certificate, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { createSigningCertificate } from './certificates.js';

export interface TokenIssuerOptions {
  /** Where the signing key and certificate are written. */
  readonly dir: string;
  /** The registry's name for itself; becomes the token audience. */
  readonly service: string;
  readonly username: string;
  readonly password: string;
  readonly expiresIn?: number;
  readonly quayMode?: boolean;
  /** Serve the realm over TLS with this certificate (as a real realm would). */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
}

export interface RepositoryAccess {
  readonly type: string;
  readonly name: string;
  readonly actions: string[];
}

/** One token request, without secrets: only whether credentials came and whether they held. */
export interface TokenRequestRecord {
  readonly scopes: string[];
  readonly hadAuthorization: boolean;
  readonly authenticated: boolean;
  readonly granted: RepositoryAccess[];
}

export interface TokenIssuerHandle {
  /** `http(s)://127.0.0.1:PORT/token`, as announced in the registry's challenge. */
  readonly realm: string;
  readonly service: string;
  /** The `iss` claim the registry expects. */
  readonly issuer: string;
  /** The signing certificate: the registry's `rootcertbundle`. */
  readonly certFile: string;
  /** Seconds in `expires_in` and in `exp`; changeable between requests. */
  expiresIn: number;
  /**
   * Behave like Quay: bad or missing credentials still get a token, one with no access,
   * so the failure surfaces as a 401 from the registry itself.
   */
  quayMode: boolean;
  /** Token requests answered (any outcome) since start or `resetStats()`. */
  readonly requests: number;
  readonly log: readonly TokenRequestRecord[];
  resetStats(): void;
  stop(): Promise<void>;
}

const ISSUER = 'prestage-test-token-issuer';

export async function startTokenIssuer(options: TokenIssuerOptions): Promise<TokenIssuerHandle> {
  const signing = await createSigningCertificate(options.dir);
  const signingKey = createPrivateKey(await readFile(signing.keyFile));
  const x5c = new X509Certificate(await readFile(signing.certFile)).raw.toString('base64');

  const log: TokenRequestRecord[] = [];
  const handle = {
    realm: '',
    service: options.service,
    issuer: ISSUER,
    certFile: signing.certFile,
    expiresIn: options.expiresIn ?? 300,
    quayMode: options.quayMode ?? false,
    get requests() {
      return log.length;
    },
    log,
    resetStats() {
      log.length = 0;
    },
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  } satisfies TokenIssuerHandle;

  const answer = (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? '/', 'http://issuer');
    if (req.method !== 'GET' || url.pathname !== '/token') {
      res.writeHead(404).end();
      return;
    }
    const scopes = url.searchParams.getAll('scope');
    const credentials = basicCredentials(req.headers.authorization);
    const authenticated = credentials?.username === options.username && credentials.password === options.password;
    const granted = authenticated ? scopes.flatMap(parseScope) : [];
    log.push({ scopes, hadAuthorization: req.headers.authorization !== undefined, authenticated, granted });

    if (!authenticated && !handle.quayMode) {
      res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': `Basic realm="${ISSUER}"` });
      res.end(JSON.stringify({ details: 'incorrect username or password' }));
      return;
    }
    const now = Math.floor(Date.now() / 1000);
    const token = signJwt(signingKey, x5c, {
      iss: ISSUER,
      sub: authenticated ? options.username : '',
      aud: url.searchParams.get('service') ?? '',
      exp: now + handle.expiresIn,
      nbf: now,
      iat: now,
      jti: randomUUID(),
      access: granted,
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({
      token,
      access_token: token,
      expires_in: handle.expiresIn,
      issued_at: new Date(now * 1000).toISOString(),
    }));
  };

  const server: Server = options.tls
    ? createHttpsServer({ cert: await readFile(options.tls.certFile), key: await readFile(options.tls.keyFile) }, answer)
    : createHttpServer(answer);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address() as AddressInfo;
  handle.realm = `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}/token`;
  return handle;
}

function basicCredentials(header: string | undefined): { username: string; password: string } | undefined {
  const match = /^Basic\s+(\S+)$/i.exec(header ?? '');
  if (!match?.[1]) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** `repository:<name>:<action>[,<action>]`; the name may itself hold colons. */
function parseScope(scope: string): RepositoryAccess[] {
  const parts = scope.split(':');
  if (parts.length < 3) return [];
  const type = parts[0] ?? '';
  const actions = (parts.at(-1) ?? '').split(',').filter((action) => action !== '');
  return [{ type, name: parts.slice(1, -1).join(':'), actions }];
}

/** JWS compact form; ES256 signatures are raw r||s (IEEE P1363), not DER. */
function signJwt(key: KeyObject, x5c: string, claims: object): string {
  const header = { typ: 'JWT', alg: 'ES256', x5c: [x5c] };
  const signingInput = `${base64url(header)}.${base64url(claims)}`;
  const signature = sign('sha256', Buffer.from(signingInput), { key, dsaEncoding: 'ieee-p1363' });
  return `${signingInput}.${signature.toString('base64url')}`;
}

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
