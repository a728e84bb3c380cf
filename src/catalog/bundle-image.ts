/**
 * The ClusterServiceVersion inside a bundle image, for bundles whose catalog entry carries only
 * `olm.csv.metadata` (most catalogs built since opm 1.28 do): its deployments say where the
 * operator's pods run, which the catalog alone does not. A bundle image is operator-sdk's layout,
 * `manifests/*.yaml` (one of them the CSV) and `metadata/annotations.yaml`, in one small layer or
 * a few; every layer is streamed (gunzip and tar, never to disk) under bounds, since the image is
 * input from outside as much as the catalog is.
 */
import { createGunzip } from 'node:zlib';
import { posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform, type TransformCallback } from 'node:stream';
import yaml from 'js-yaml';
import { BadInputError, RegistryError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import { parseReference } from '../registry/reference.js';
import type { BundleDeployment } from './declcfg.js';
import { deploymentsOfCsv } from './load.js';

/** A bundle image is a few manifests: past these it is not one. */
const MAX_LAYER_BYTES = 64 * 1024 * 1024;
const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;
const MAX_LAYERS = 16;

/**
 * The CSV's deployments, or undefined when the image holds no CSV under `manifests/` (a warning
 * says so); a registry that fails is a warning too, and the bundle keeps the catalog's evidence.
 */
export async function readBundleDeployments(client: RegistryClient, reference: string, arch: string, warnings: string[]): Promise<BundleDeployment[] | undefined> {
  const ref = parseReference(reference);
  let image;
  try {
    image = await client.resolveImage(ref, arch);
  } catch (error) {
    if (!(error instanceof RegistryError || error instanceof BadInputError)) throw error;
    warnings.push(`bundle image ${reference} could not be read (${error.message}); its images are placed by the worker default`);
    return undefined;
  }
  if (image.manifest.layers.length > MAX_LAYERS) throw new BadInputError(`bundle image ${reference} has ${image.manifest.layers.length} layers, over the ${MAX_LAYERS} a bundle image holds; not a bundle image`);
  const tar = (await import('tar-stream')).default;
  for (const layer of [...image.manifest.layers].reverse()) {
    const extract = tar.extract();
    let csv: unknown;
    const collect = (async () => {
      for await (const entry of extract) {
        const name = posix.normalize(entry.header.name.replace(/^(\.\/)+/, ''));
        if (entry.header.type === 'file' && name.startsWith('manifests/') && /\.ya?ml$|\.json$/.test(name) && csv === undefined) {
          if ((entry.header.size ?? 0) > MAX_MANIFEST_BYTES) throw new BadInputError(`bundle image ${reference}: ${name} is over ${MAX_MANIFEST_BYTES} bytes; not a bundle manifest`);
          const parts: Buffer[] = [];
          for await (const chunk of entry as AsyncIterable<Buffer>) parts.push(chunk);
          csv = csvOf(Buffer.concat(parts).toString('utf8'), `bundle image ${reference}: ${name}`);
        }
        entry.resume();
      }
    })();
    const blob = client.blobStream(ref, layer);
    const unpacked = /gzip/.test(layer.mediaType) ? pipeline(blob, createGunzip(), byteLimit(reference), extract) : pipeline(blob, byteLimit(reference), extract);
    try {
      await Promise.all([unpacked, collect]);
    } catch (error) {
      extract.destroy();
      if (error instanceof BadInputError || error instanceof RegistryError) throw error;
      throw new BadInputError(`bundle image ${reference}: layer ${layer.digest} is not a valid tar (${(error as Error).message})`);
    }
    if (csv !== undefined) return deploymentsOfCsv(csv, `bundle image ${reference}`);
  }
  warnings.push(`bundle image ${reference} holds no ClusterServiceVersion under manifests/; its images are placed by the worker default`);
  return undefined;
}

/** The file's CSV document, if it holds one; YAML read with the JSON schema only (no custom tags). */
function csvOf(text: string, where: string): unknown {
  let docs: unknown[];
  try {
    docs = yaml.loadAll(text, undefined, { schema: yaml.JSON_SCHEMA, json: true });
  } catch (error) {
    throw new BadInputError(`${where} is not valid YAML (${(error as Error).message.split('\n')[0]})`);
  }
  return docs.find((doc) => typeof doc === 'object' && doc !== null && (doc as { kind?: unknown }).kind === 'ClusterServiceVersion');
}

function byteLimit(reference: string): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      seen += chunk.length;
      if (seen > MAX_LAYER_BYTES) done(new BadInputError(`bundle image ${reference}: a layer expands beyond ${MAX_LAYER_BYTES} bytes; not a bundle image`));
      else done(null, chunk);
    },
  });
}
