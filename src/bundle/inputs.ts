/**
 * What `bundle create` starts from: a plan file written by `prestage plan -o json`, and for
 * `--since` the blobs a previous bundle already carried across.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { BadInputError } from '../errors.js';
import { PLAN_API_VERSION, type Plan } from '../plan/types.js';
import { isDigest } from '../registry/reference.js';
import { BLOBS_DIR, readBundle } from './layout.js';

export async function readPlanFile(file: string): Promise<Plan> {
  let doc: Partial<Plan>;
  try {
    doc = JSON.parse(await readFile(file, 'utf8')) as Partial<Plan>;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new BadInputError(code ? `cannot read plan file ${file}: ${code}` : `plan file ${file} is not JSON; write one with \`prestage plan RELEASE -o json > plan.json\``);
  }
  if (doc.apiVersion !== PLAN_API_VERSION || doc.kind !== 'Plan' || !Array.isArray(doc.images) || !doc.release) {
    throw new BadInputError(`${file} is not a ${PLAN_API_VERSION} Plan; write one with \`prestage plan RELEASE -o json > plan.json\``);
  }
  for (const image of doc.images) {
    if (typeof image?.pullSpec !== 'string' || !isDigest(image.digest) || !image.pullSpec.endsWith(`@${image.digest}`)) {
      throw new BadInputError(`${file}: image ${JSON.stringify(image?.pullSpec)} has no digest pullspec; the plan file was edited or truncated`);
    }
  }
  return doc as Plan;
}

/** Configs and layers of every planned image. */
export function planBlobs(plan: Plan): Set<string> {
  return new Set(plan.images.flatMap((i) => [i.config.digest, ...i.layers.map((l) => l.digest)]));
}

/**
 * Configs and layers of every planned image, with their sizes: what a bundle needs at least.
 * Only a floor for the first free-space check, so a plan image that names none adds nothing.
 */
export function planBlobSizes(plan: Plan): Map<string, number> {
  const sizes = new Map<string, number>();
  for (const image of plan.images) {
    if (image.config) sizes.set(image.config.digest, image.config.size);
    for (const layer of image.layers ?? []) sizes.set(layer.digest, layer.compressedBytes);
  }
  return sizes;
}

/**
 * Blobs a previous bundle carries: the ones it holds and the ones it expected from its own
 * predecessor (those are on the target already if the bundles were pushed in order).
 */
export async function previousBundleBlobs(dir: string): Promise<Set<string>> {
  const bundle = await readBundle(dir);
  const held = (await readdir(join(dir, BLOBS_DIR))).map((hex) => `sha256:${hex}`).filter(isDigest);
  return new Set([...held, ...(bundle.metadata.previous?.blobs.map((b) => b.digest) ?? [])]);
}
