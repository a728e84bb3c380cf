/**
 * The agent image, built the way `crane append` and ko build one: a Node.js base image from a
 * registry, plus ONE layer holding prestage itself under /app (package.json, bin, dist, proto and
 * the production node_modules), for every linux platform the base offers, pushed with prestage's
 * own registry client. No container engine, no Dockerfile: the layer is the same bytes on every
 * platform (prestage has no native modules), and the base's layers are mounted or copied as they are.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { BadInputError, RegistryError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import { MediaType, type Descriptor, type ImageManifest } from '../registry/manifest.js';
import type { Plan, SkippedImage } from '../plan/types.js';
import { formatReference, parseReference, type ImageReference } from '../registry/reference.js';
import type { PushClient } from '../registry/upload.js';

/** Node.js 20 (the engines range) on Debian bookworm: has nsenter for `--reload=systemctl`. */
export const DEFAULT_AGENT_BASE = 'docker.io/library/node:20-bookworm-slim';
/** The single executable's base when none is named: the C library and nsenter (util-linux), no Node.js. */
export const DEFAULT_EXECUTABLE_BASE = 'docker.io/library/debian:bookworm-slim';
/** Where prestage sits in the image: the package under /app, or the single executable. */
export const APP_DIR = 'app';
const EXECUTABLE_PATH = '/usr/local/bin/prestage';

/** What runs: the package with the base's Node.js, or the single executable alone. */
export interface AgentPayload {
  readonly kind: 'package' | 'executable';
  /** The layer for a platform (`linux/amd64`); undefined: none for that platform, which is left out. */
  readonly layerFor: (platform: string) => AppLayer | undefined;
}

function entrypointOf(payload: AgentPayload): { Entrypoint: string[]; WorkingDir: string; placed: string } {
  return payload.kind === 'package'
    ? { Entrypoint: ['node', `/${APP_DIR}/bin/prestage.js`], WorkingDir: `/${APP_DIR}`, placed: `in /${APP_DIR}` }
    : { Entrypoint: [EXECUTABLE_PATH], WorkingDir: '/', placed: `as ${EXECUTABLE_PATH}` };
}
/** Image configs are small; a base whose config is larger is not what we think it is. */
const MAX_CONFIG_BYTES = 4 * 2 ** 20;

export interface AppLayer {
  /** sha256 of the gzip bytes: the blob digest. */
  readonly digest: string;
  /** sha256 of the uncompressed tar: the rootfs diff_id. */
  readonly diffId: string;
  readonly gzip: Buffer;
  readonly files: number;
}

/**
 * prestage's own layer from its package root: package.json, bin/, dist/, proto/ and the
 * packages `dependencies` reach (resolved as Node resolves them), all under /app. Entries are
 * sorted, owned by root and dated 1970, so the same tree gives the same digest.
 */
export async function buildAppLayer(root: string): Promise<AppLayer> {
  for (const part of ['package.json', 'bin', 'dist', 'proto']) {
    if (!existsSync(join(root, part))) throw new BadInputError(`${join(root, part)} is missing: run npm run build in ${root} first`);
  }
  const paths = new Set<string>();
  const addTree = (path: string) => {
    paths.add(path);
    if (lstatSync(path).isDirectory()) for (const entry of readdirSync(path)) addTree(join(path, entry));
  };
  for (const part of ['package.json', 'bin', 'dist', 'proto']) addTree(join(root, part));
  for (const dir of productionPackages(root)) {
    // Parent directories too (node_modules, @scope), so the tar creates them with their modes.
    for (let parent = dirname(dir); parent.length > root.length; parent = dirname(parent)) paths.add(parent);
    addTree(dir);
  }
  const sorted = [...paths].sort();
  return layerOf([`${APP_DIR}/`, ...sorted.map((path) => `${APP_DIR}/${relative(root, path)}`)], (name) => join(root, name.slice(APP_DIR.length + 1)), sorted.length);
}

/**
 * The single executable's layer (`npm run dist`): the one file, as /usr/local/bin/prestage. The
 * base brings the C library the executable links against (it is Node.js's binary), nothing else.
 */
export async function buildExecutableLayer(executable: string): Promise<AppLayer> {
  if (!existsSync(executable)) throw new BadInputError(`${executable} is missing: run npm run dist first, or name its output directory with --executable`);
  return layerOf(['usr/', 'usr/local/', 'usr/local/bin/', EXECUTABLE_PATH.slice(1)], (name) => (name === EXECUTABLE_PATH.slice(1) ? executable : undefined), 1);
}

/**
 * A reproducible gzip tar of `names` (in order; a trailing / is a directory), each read from
 * `source(name)` (undefined: a directory); owned by root, dated 1970.
 */
export async function layerOf(names: readonly string[], source: (name: string) => string | undefined, files: number): Promise<AppLayer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  const ended = (async () => {
    for await (const chunk of archive) chunks.push(chunk as Buffer);
  })();
  const common = { uid: 0, gid: 0, uname: 'root', gname: 'root', mtime: new Date(0) };
  for (const name of names) {
    const path = name.endsWith('/') ? undefined : source(name);
    const stat = path === undefined ? undefined : lstatSync(path);
    if (!stat || stat.isDirectory()) archive.entry({ name: name.endsWith('/') ? name : `${name}/`, type: 'directory', mode: 0o755, ...common });
    else if (stat.isSymbolicLink()) archive.entry({ name, type: 'symlink', linkname: readlinkSync(path!), mode: 0o777, ...common });
    else archive.entry({ name, mode: stat.mode & 0o111 ? 0o755 : 0o644, ...common }, readFileSync(path!));
  }
  archive.finalize();
  await ended;
  const tar = Buffer.concat(chunks);
  const gzip = gzipSync(tar, { level: 9 });
  return { digest: sha256(gzip), diffId: sha256(tar), gzip, files };
}

/** The package directories `dependencies` (and installed `optionalDependencies`) reach from `root`, as Node resolves them. */
export function productionPackages(root: string): string[] {
  const found = new Set<string>();
  const visit = (from: string) => {
    const manifest = JSON.parse(readFileSync(join(from, 'package.json'), 'utf8')) as { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };
    const optional = new Set(Object.keys(manifest.optionalDependencies ?? {}));
    for (const name of new Set([...Object.keys(manifest.dependencies ?? {}), ...optional])) {
      const dir = resolvePackage(from, root, name);
      if (!dir) {
        if (optional.has(name)) continue;
        throw new BadInputError(`${name} (a dependency of ${relative(root, from) || 'prestage'}) is not installed: run npm ci in ${root}`);
      }
      if (found.has(dir)) continue;
      found.add(dir);
      visit(dir);
    }
  };
  visit(root);
  // A package inside another one's node_modules comes with it.
  const dirs = [...found].sort();
  return dirs.filter((dir) => !dirs.some((other) => other !== dir && dir.startsWith(`${other}/`)));
}

/** `node_modules/<name>` in `from` or the nearest directory above it, up to `root`. */
function resolvePackage(from: string, root: string, name: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dir === root || dir === dirname(dir)) return undefined;
  }
}

export interface PushedPlatform {
  readonly platform: string;
  readonly digest: string;
}

export interface AgentImage {
  /** `registry/repository:tag@digest` of what the tag names now. */
  readonly reference: string;
  readonly digest: string;
  readonly platforms: readonly PushedPlatform[];
  /** Platforms of the base for which the payload had no layer. */
  readonly skipped: readonly string[];
}

interface BaseImage {
  readonly platform: string;
  readonly descriptor?: Descriptor;
  readonly manifest: ImageManifest;
  readonly config: Record<string, unknown>;
  readonly configMediaType: string;
}

/**
 * Appends the payload's layer to every linux platform of `base` it has one for and pushes the
 * result to `target` (a tag): one image per platform, and an index over them when the base was one.
 */
export async function pushAgentImage(options: {
  readonly base: ImageReference;
  readonly target: ImageReference & { readonly tag: string };
  readonly payload: AgentPayload;
  readonly reader: RegistryClient;
  readonly writer: PushClient;
  readonly version: string;
  readonly onPlatform?: (platform: string) => void;
}): Promise<AgentImage> {
  const { base, target, payload, reader, writer } = options;
  const top = await reader.fetchManifest(base);
  const bases: BaseImage[] = [];
  if (top.manifest.kind === 'image') {
    bases.push(await readBase(reader, base, top.manifest, undefined));
  } else {
    // Attestations and other non-images carry platform unknown/unknown: not a platform to run on.
    for (const entry of top.manifest.manifests.filter((candidate) => candidate.platform?.os === 'linux')) {
      const child = await reader.fetchManifest(base, entry.digest);
      if (child.manifest.kind !== 'image') throw new RegistryError(`${formatReference(base)}: its ${platformName(entry)} entry is itself a list`);
      bases.push(await readBase(reader, base, child.manifest, entry));
    }
    if (bases.length === 0) throw new BadInputError(`${formatReference(base)} offers no linux platform`);
  }
  const repository = target.repository;
  const sameRegistry = base.registry === target.registry;
  const pushed: Array<PushedPlatform & { descriptor: Descriptor }> = [];
  const skipped: string[] = [];
  for (const image of bases) {
    const layer = payload.layerFor(image.platform);
    if (!layer) {
      skipped.push(image.platform);
      continue;
    }
    options.onPlatform?.(image.platform);
    if (!(await writer.hasBlob(repository, layer.digest))) await writer.uploadBlob(repository, { digest: layer.digest, size: layer.gzip.length }, () => Readable.from([layer.gzip]));
    for (const blob of image.manifest.layers) {
      if (await writer.hasBlob(repository, blob.digest)) continue;
      await writer.uploadBlob(repository, blob, () => reader.blobStream(base, blob), sameRegistry ? base.repository : undefined);
    }
    const config = Buffer.from(JSON.stringify(appendedConfig(image.config, layer, options.version, entrypointOf(payload))));
    const configDigest = sha256(config);
    await writer.uploadBlob(repository, { digest: configDigest, size: config.length }, () => Readable.from([config]));
    const oci = image.manifest.mediaType === MediaType.ociManifest;
    const manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: image.manifest.mediaType,
        config: { mediaType: image.configMediaType, digest: configDigest, size: config.length },
        layers: [
          ...image.manifest.layers.map(({ mediaType, digest, size }) => ({ mediaType, digest, size })),
          { mediaType: oci ? 'application/vnd.oci.image.layer.v1.tar+gzip' : 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: layer.digest, size: layer.gzip.length },
        ],
      }),
    );
    const digest = sha256(manifest);
    await writer.putManifest(repository, digest, manifest, image.manifest.mediaType, image.descriptor ? undefined : target.tag);
    pushed.push({ platform: image.platform, digest, descriptor: { mediaType: image.manifest.mediaType, digest, size: manifest.length, ...(image.descriptor?.platform ? { platform: image.descriptor.platform } : {}) } });
  }
  if (pushed.length === 0) throw new BadInputError(`${formatReference(base)} offers ${bases.map((b) => b.platform).join(', ')}: none that prestage has an executable for`);
  let digest = pushed[0]!.digest;
  if (top.manifest.kind === 'list') {
    const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: top.manifest.mediaType, manifests: pushed.map((entry) => entry.descriptor) }));
    digest = sha256(index);
    await writer.putManifest(repository, digest, index, top.manifest.mediaType, target.tag);
  }
  return { reference: `${formatReference(target)}@${digest}`, digest, platforms: pushed.map(({ platform, digest: platformDigest }) => ({ platform, digest: platformDigest })), skipped };
}

async function readBase(reader: RegistryClient, base: ImageReference, manifest: ImageManifest, descriptor: Descriptor | undefined): Promise<BaseImage> {
  const config = JSON.parse((await reader.readBlob(base, manifest.config, MAX_CONFIG_BYTES)).toString('utf8')) as Record<string, unknown>;
  const platform = descriptor ? platformName(descriptor) : `${String(config.os)}/${String(config.architecture)}${config.variant ? `/${String(config.variant)}` : ''}`;
  return { platform, descriptor, manifest, config, configMediaType: manifest.config.mediaType || 'application/vnd.oci.image.config.v1+json' };
}

/** The base's config with our layer on top and prestage as the entrypoint. */
function appendedConfig(base: Record<string, unknown>, layer: AppLayer, version: string, run: ReturnType<typeof entrypointOf>): Record<string, unknown> {
  const rootfs = (base.rootfs ?? { type: 'layers', diff_ids: [] }) as { type: string; diff_ids: string[] };
  const config = { ...((base.config ?? {}) as Record<string, unknown>) };
  const created = new Date(0).toISOString();
  return {
    ...base,
    created,
    config: {
      ...config,
      Entrypoint: run.Entrypoint,
      Cmd: null,
      WorkingDir: run.WorkingDir,
      Env: [...((config.Env as string[] | undefined) ?? []).filter((entry) => !entry.startsWith('NODE_ENV=')), 'NODE_ENV=production'],
      Labels: { ...((config.Labels as Record<string, string> | null | undefined) ?? {}), 'org.opencontainers.image.title': 'prestage', 'org.opencontainers.image.version': version },
    },
    rootfs: { ...rootfs, diff_ids: [...rootfs.diff_ids, layer.diffId] },
    history: [...((base.history as unknown[] | undefined) ?? []), { created, created_by: `prestage image push (prestage ${version} ${run.placed})` }],
  };
}

function platformName(descriptor: Descriptor): string {
  const platform = descriptor.platform;
  return platform ? `${platform.os}/${platform.architecture}${platform.variant ? `/${platform.variant}` : ''}` : 'unknown';
}

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/**
 * `bundle create --agent-image REF`: the agent image as one more image the bundle carries (in the
 * plan's skipped[], the images no set pins), named by digest so `bundle push` mirrors it as it does
 * the release's. REF may name a tag: it is resolved here, once.
 */
export async function withAgentImage(reader: RegistryClient, plan: Plan, reference: string): Promise<Plan> {
  return (await withCarriedImage(reader, plan, reference, { flag: '--agent-image', name: 'prestage-agent', why: `the prestage agent image (${reference}), carried by --agent-image` })).plan;
}

/**
 * `plan` with one more image for a bundle to carry (in no set: `skipped`, with why): as named,
 * or with `arch` one platform's image (a base another image is built over).
 */
export async function withCarriedImage(reader: RegistryClient, plan: Plan, reference: string, what: { flag: string; name: string; why: string; arch?: string }): Promise<{ plan: Plan; pullSpec: string }> {
  let ref: ImageReference;
  try {
    ref = parseReference(reference);
  } catch (error) {
    throw new BadInputError(`${what.flag}: ${(error as Error).message}`);
  }
  const digest = what.arch ? (await reader.resolveImage(ref, what.arch)).digest : (await reader.fetchManifest(ref)).digest;
  const pullSpec = formatReference({ registry: ref.registry, repository: ref.repository, digest });
  const entry: SkippedImage = { name: what.name, names: [what.name], pullSpec, digest, why: what.why };
  return { plan: { ...plan, skipped: [...(plan.skipped ?? []).filter((image) => image.pullSpec !== pullSpec), entry] }, pullSpec };
}
