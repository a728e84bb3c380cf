/**
 * The update graph for a disconnected cluster: the graph data of a path's bundles
 * (path-index.ts) as the image an OpenShift Update Service reads it from (its graphDataImage:
 * an init container that copies /var/lib/cincinnati-graph-data into the volume the service
 * reads, as oc-mirror's graph image does), built over a base image the first hop's bundle
 * carries (it needs a shell and cp), and the UpdateService that serves it with the mirrored
 * releases. ClusterVersion spec.upstream then names the service's policy engine.
 */
import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { Readable } from 'node:stream';
import yaml from 'js-yaml';
import { BadInputError } from '../errors.js';
import { READ_BOUNDS } from '../net/read-bounded.js';
import { layerOf } from '../install/agent-image.js';
import { MediaType, type ImageManifest } from '../registry/manifest.js';
import { parseReference } from '../registry/reference.js';
import type { PushClient } from '../registry/upload.js';
import { mirrorRepository, type MirrorTarget } from './mirror.js';

export const GRAPH_IMAGE_REPOSITORY = 'openshift/graph-image';
/** Where the image holds the data, and where the Update Service's init container mounts its volume. */
const DATA_IN_IMAGE = 'var/lib/cincinnati-graph-data';
const SERVICE_VOLUME = '/var/lib/cincinnati/graph-data';
export const GRAPH_COMMAND = ['/bin/bash', '-c', `exec cp -rp /${DATA_IN_IMAGE}/* ${SERVICE_VOLUME}`];
export const UPDATE_SERVICE_FILE = 'update-service.yaml';
const DOCKER = { manifest: MediaType.dockerManifest, config: 'application/vnd.docker.container.image.v1+json', layer: 'application/vnd.docker.image.rootfs.diff.tar.gzip' } as const;
const OCI = { manifest: MediaType.ociManifest, config: 'application/vnd.oci.image.config.v1+json', layer: 'application/vnd.oci.image.layer.v1.tar+gzip' } as const;

export interface GraphBase {
  /** The base image's source pullspec by digest (one platform). */
  readonly pullSpec: string;
  /** Its blobs, from the bundle that carries it, verified. */
  readonly read: (digest: string) => Promise<Buffer>;
}

/** Builds the graph image over `base` and pushes it as GRAPH_IMAGE_REPOSITORY:latest; returns its mirror pullspec by digest. */
export async function pushGraphImage(client: PushClient, target: MirrorTarget, graphDataDir: string, base: GraphBase): Promise<string> {
  const baseRef = parseReference(base.pullSpec);
  if (!baseRef.digest) throw new BadInputError(`graph base image ${base.pullSpec}: not by digest`);
  const manifest = await readJson<ImageManifest>(base, baseRef.digest, 'manifest');
  if (!manifest.config || !Array.isArray(manifest.layers)) throw new BadInputError(`graph base image ${base.pullSpec}: not a single-platform image manifest; carry one platform's image`);
  const config = await readJson<{ config?: Record<string, unknown>; rootfs?: { diff_ids?: string[] }; history?: unknown[] }>(base, manifest.config.digest, 'config');
  const files = await listFiles(graphDataDir);
  const names = [...new Set(files.flatMap((file) => parentsOf(file)))].map((dir) => `${DATA_IN_IMAGE}/${dir}/`);
  const layer = await layerOf([`${DATA_IN_IMAGE}/`, ...names, ...files.map((file) => `${DATA_IN_IMAGE}/${file}`)].sort(), (name) => (name.endsWith('/') ? undefined : join(graphDataDir, name.slice(DATA_IN_IMAGE.length + 1))), files.length);
  const newConfig = Buffer.from(JSON.stringify({
    ...config,
    config: { ...(config.config ?? {}), Entrypoint: null, Cmd: GRAPH_COMMAND },
    rootfs: { type: 'layers', diff_ids: [...(config.rootfs?.diff_ids ?? []), layer.diffId] },
    history: [...(config.history ?? []), { created: '1970-01-01T00:00:00Z', created_by: 'prestage bundle push: the update graph data', comment: 'prestage' }],
  }));
  const configDigest = sha256(newConfig);
  // The base's own format: a Docker manifest keeps Docker media types, an OCI one OCI's.
  const types = manifest.mediaType === MediaType.dockerManifest ? DOCKER : OCI;
  const image = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: types.manifest,
    config: { mediaType: types.config, digest: configDigest, size: newConfig.length },
    layers: [...manifest.layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.size })), { mediaType: types.layer, digest: layer.digest, size: layer.gzip.length }],
  }));
  const repository = target.prefix ? `${target.prefix}/${GRAPH_IMAGE_REPOSITORY}` : GRAPH_IMAGE_REPOSITORY;
  const baseRepository = mirrorRepository(baseRef, target);
  // The base's layers were pushed with its bundle: mounted from its repository, sent only if the mirror lacks them there.
  for (const l of manifest.layers) {
    if (await client.hasBlob(repository, l.digest)) continue;
    await client.uploadBlob(repository, { digest: l.digest, size: l.size }, () => Readable.from([]), baseRepository).catch(async () => {
      const bytes = await base.read(l.digest);
      return client.uploadBlob(repository, { digest: l.digest, size: bytes.length }, () => Readable.from([bytes]));
    });
  }
  await client.uploadBlob(repository, { digest: layer.digest, size: layer.gzip.length }, () => Readable.from([layer.gzip]));
  await client.uploadBlob(repository, { digest: configDigest, size: newConfig.length }, () => Readable.from([newConfig]));
  const digest = sha256(image);
  await client.putManifest(repository, digest, image, types.manifest, 'latest');
  return `${target.registry}/${repository}@${digest}`;
}

/** The UpdateService (updateservice.operator.openshift.io/v1) serving the mirrored releases with the graph image. */
export function renderUpdateService(releasesRepository: string, graphImage: string, name = 'prestage-update-service'): string {
  return yaml.dump({
    apiVersion: 'updateservice.operator.openshift.io/v1',
    kind: 'UpdateService',
    metadata: { name, namespace: 'openshift-update-service' },
    spec: { replicas: 2, releases: releasesRepository, graphDataImage: graphImage },
  }, { lineWidth: -1 });
}

/** A manifest or config of the base from its bundle (verified), bounded as registries bound manifests; a bad one is one line. */
async function readJson<T>(base: GraphBase, digest: string, what: string): Promise<T> {
  const bytes = await base.read(digest);
  if (bytes.length > READ_BOUNDS.manifest) throw new BadInputError(`graph base image ${base.pullSpec}: its ${what} is ${bytes.length} bytes, over the ${READ_BOUNDS.manifest}-byte bound; carry another --graph-base-image`);
  try {
    return JSON.parse(bytes.toString('utf8')) as T;
  } catch {
    throw new BadInputError(`graph base image ${base.pullSpec}: its ${what} is not JSON; carry another --graph-base-image`);
  }
}

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => relative(dir, join(e.parentPath, e.name))).sort();
}

function parentsOf(file: string): string[] {
  const parts = file.split('/');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
}

function sha256(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}
