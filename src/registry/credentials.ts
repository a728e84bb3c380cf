/**
 * Registry credentials from pull-secret files: the shape shared by OpenShift pull secrets,
 * `~/.docker/config.json`, podman's `auth.json` and the kubelet's `config.json`.
 * Credentials stay inside this module and the transport; they are never logged.
 */
import { readFileSync, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { BadInputError } from '../errors.js';
import { DOCKER_HUB } from './reference.js';

export interface Credential {
  readonly username?: string;
  readonly password?: string;
  /** An OAuth refresh token: exchanged at the token realm instead of a password. */
  readonly identityToken?: string;
}

interface AuthEntry {
  auth?: string;
  username?: string;
  password?: string;
  identitytoken?: string;
}

export interface PullSecret {
  /** Where it was read from, for messages. */
  readonly source: string;
  /** Normalised key (`host`, `host/ns`, `host/ns/repo`) to credential. */
  readonly entries: ReadonlyMap<string, Credential>;
}

/** The files podman and skopeo consult when no --authfile is given, in their order. */
export function defaultAuthFiles(env: NodeJS.ProcessEnv = process.env): string[] {
  const files: string[] = [];
  if (env.REGISTRY_AUTH_FILE) files.push(env.REGISTRY_AUTH_FILE);
  if (env.XDG_RUNTIME_DIR) files.push(join(env.XDG_RUNTIME_DIR, 'containers', 'auth.json'));
  files.push(join(env.DOCKER_CONFIG ?? join(homedir(), '.docker'), 'config.json'));
  return files;
}

/**
 * Load the pull secrets to use: an explicit file must exist and parse; default locations
 * are used when present and skipped when absent.
 */
export function loadPullSecrets(explicitFile: string | undefined, env: NodeJS.ProcessEnv = process.env): PullSecret[] {
  if (explicitFile) return [parsePullSecretFile(explicitFile)];
  return defaultAuthFiles(env).filter((f) => existsSync(f)).map((f) => parsePullSecretFile(f));
}

export function parsePullSecretFile(file: string): PullSecret {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new BadInputError(`cannot read registry auth file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}; pass an existing file with --registry-config`);
  }
  return parsePullSecret(text, file);
}

const AUTHS_SHAPE = '{"auths": {"<registry>": {"auth": "<base64 user:password>"}}}';

export function parsePullSecret(text: string, source: string): PullSecret {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new BadInputError(`registry auth file ${source} is not valid JSON; expected ${AUTHS_SHAPE}`);
  }
  return pullSecretOf(doc, source, `registry auth file ${source}`);
}

/**
 * A parsed `{"auths": ...}` document (a file, or a Kubernetes pull Secret's payload). `label`
 * names it in errors, which never quote a credential.
 */
export function pullSecretOf(doc: unknown, source: string, label: string): PullSecret {
  const auths = (doc as { auths?: unknown } | null)?.auths;
  if (auths === undefined || auths === null || typeof auths !== 'object' || Array.isArray(auths)) {
    throw new BadInputError(`${label} has no "auths" object; expected ${AUTHS_SHAPE}`);
  }
  const entries = new Map<string, Credential>();
  for (const [key, raw] of Object.entries(auths as Record<string, unknown>)) {
    const entry = (raw ?? {}) as AuthEntry;
    const cred = toCredential(entry, key, label);
    if (cred) entries.set(normaliseAuthKey(key), cred);
  }
  return { source, entries };
}

function toCredential(entry: AuthEntry, key: string, label: string): Credential | undefined {
  if (entry.identitytoken) return { identityToken: entry.identitytoken };
  if (entry.auth) {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon <= 0) {
      throw new BadInputError(`${label}: the "auth" of "${key}" is not base64 of user:password`);
    }
    return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  if (entry.username !== undefined && entry.password !== undefined) {
    return { username: entry.username, password: entry.password };
  }
  return undefined;
}

/** Keys may be URLs (`https://index.docker.io/v1/`) or bare `host[/path]`. */
export function normaliseAuthKey(key: string): string {
  let k = key.trim().replace(/^[a-z]+:\/\//, '').replace(/\/+$/, '');
  if (k === 'index.docker.io/v1' || k === 'index.docker.io' || k === 'registry-1.docker.io') k = DOCKER_HUB;
  return k;
}

/**
 * The credential for a repository: the most specific key wins (`host/ns/repo` over `host/ns`
 * over `host`); among several files, the first file with any match wins, as in podman.
 */
export function findCredential(secrets: readonly PullSecret[], registry: string, repository: string): Credential | undefined {
  const candidates: string[] = [];
  const parts = repository.split('/');
  for (let i = parts.length; i >= 1; i--) candidates.push(`${registry}/${parts.slice(0, i).join('/')}`);
  candidates.push(registry);
  for (const secret of secrets) {
    for (const key of candidates) {
      const cred = secret.entries.get(key);
      if (cred) return cred;
    }
  }
  return undefined;
}
