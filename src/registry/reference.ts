/**
 * Image references: parse and normalise, no I/O. Follows the docker/distribution grammar:
 * the first path component is a registry host only if it looks like one (has a dot or a
 * port, or is `localhost`); otherwise the image lives on Docker Hub, where single-component
 * names get `library/`.
 */
import { BadInputError } from '../errors.js';

export const DOCKER_HUB = 'docker.io';
/** Docker Hub's API endpoint differs from its name in references. */
const DOCKER_HUB_API = 'registry-1.docker.io';

export interface ImageReference {
  /** Registry host as written in references, with port: `quay.io`, `127.0.0.1:5000`, `docker.io`. */
  readonly registry: string;
  /** Repository path inside the registry: `openshift-release-dev/ocp-release`. */
  readonly repository: string;
  readonly tag?: string;
  /** `sha256:<hex>`; when present it wins over the tag. */
  readonly digest?: string;
}

const DIGEST = /^sha256:[a-f0-9]{64}$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const HOST = /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])(?::[0-9]{1,5})?$/;

export function isDigest(value: string): boolean {
  return DIGEST.test(value);
}

/** A tag as the distribution grammar has it: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`. */
export function isTag(value: unknown): value is string {
  return typeof value === 'string' && TAG.test(value);
}

/** A repository path inside a registry: lowercase components joined by `/`, at most 255 characters. */
export function isRepositoryPath(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 255 && value.split('/').every((p) => PATH_COMPONENT.test(p));
}

export function parseReference(input: string): ImageReference {
  const fail = (why: string): never => {
    throw new BadInputError(`invalid image reference "${input}": ${why}; expected [registry/]repository[:tag][@sha256:<64 hex>]`);
  };
  const text = input.trim();
  if (text === '') fail('empty');
  if (/\s/.test(text)) fail('contains whitespace');

  let rest = text;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) fail(`digest "${digest}" is not sha256:<64 lowercase hex>`);
  }

  let tag: string | undefined;
  const lastSlash = rest.lastIndexOf('/');
  const colon = rest.lastIndexOf(':');
  if (colon > lastSlash) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) fail(`tag "${tag}" is not valid`);
  }

  const parts = rest.split('/');
  let registry = DOCKER_HUB;
  const first = parts[0] ?? '';
  if (parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost' || first.startsWith('['))) {
    registry = first;
    parts.shift();
    if (!HOST.test(registry)) fail(`registry host "${registry}" is not valid`);
  }
  if (registry === 'index.docker.io') registry = DOCKER_HUB;
  if (parts.length === 0 || parts.some((p) => p === '')) fail('empty repository path component');
  for (const p of parts) {
    if (!PATH_COMPONENT.test(p)) fail(`repository component "${p}" must be lowercase letters, digits and separators`);
  }
  if (registry === DOCKER_HUB && parts.length === 1) parts.unshift('library');
  const repository = parts.join('/');
  if (repository.length > 255) fail('repository name longer than 255 characters');

  return { registry, repository, ...(tag !== undefined ? { tag } : {}), ...(digest !== undefined ? { digest } : {}) };
}

/** Canonical text: `registry/repository[:tag][@digest]`. */
export function formatReference(ref: ImageReference): string {
  return `${ref.registry}/${ref.repository}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}

/** The pullspec of one manifest: `registry/repository@digest` (what PinnedImageSets require). */
export function digestReference(ref: ImageReference, digest: string): string {
  return `${ref.registry}/${ref.repository}@${digest}`;
}

/** Host to connect to for a registry name. */
export function apiHost(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_API : registry;
}
