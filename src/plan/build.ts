/**
 * The plan pipeline: read release facts (I/O) → classify (pure) → measure (I/O) →
 * assemble (pure).
 */
import { readFileSync } from 'node:fs';
import { BadInputError } from '../errors.js';
import type { RegistryClient } from '../registry/client.js';
import { digestReference, parseReference } from '../registry/reference.js';
import { readRelease } from '../release/payload.js';
import { assemblePlan, type ExtraImage } from './assemble.js';
import { classifyComponents, type ClassifyOptions } from './classify.js';
import { measureImages } from './sizes.js';
import type { ImageRole, Plan } from './types.js';

export interface PlanOptions extends ClassifyOptions {
  readonly release: string;
  readonly arch: string;
  /** Extra image references (tags are resolved to digests). */
  readonly extraImages: readonly string[];
  readonly extraRole: ImageRole;
  readonly namePrefix: string;
}

export async function buildPlan(client: RegistryClient, opts: PlanOptions): Promise<Plan> {
  const facts = await readRelease(client, opts.release, opts.arch);
  const warnings = [...facts.warnings];
  const classifications = classifyComponents(facts.components, facts.documents, opts);
  warnUnknownNames(opts, facts.components.flatMap((c) => c.names), warnings);

  const extraRefs = opts.extraImages.map((text) => parseReference(text));
  const measured = await measureImages(
    client,
    [parseReference(facts.release.pullSpec), ...facts.components.map((c) => parseReference(c.pullSpec)), ...extraRefs],
    opts.arch,
    warnings,
  );
  const releaseImage = measured[0]!;
  const componentSizes = measured.slice(1, 1 + facts.components.length);
  const extras: ExtraImage[] = extraRefs.map((ref, i) => {
    const m = measured[1 + facts.components.length + i]!;
    return { name: ref.repository.split('/').at(-1)!, pullSpec: digestReference(ref, m.digest), digest: m.digest, role: opts.extraRole, measured: m };
  });

  return assemblePlan({
    release: facts.release,
    releaseImage,
    components: facts.components,
    classifications,
    sizes: new Map(facts.components.map((c, i) => [c.digest, componentSizes[i]!])),
    extras,
    profile: opts.profile,
    namePrefix: opts.namePrefix,
    warnings,
  });
}

function warnUnknownNames(opts: ClassifyOptions, known: string[], warnings: string[]): void {
  const names = new Set(known);
  for (const n of [...opts.controlPlaneOnly, ...opts.allNodes]) {
    if (!names.has(n)) warnings.push(`--control-plane-only/--all-nodes name ${n} is not a component of this release`);
  }
}

/** `--images-file`: one reference per line; blank lines and `#` comments ignored. */
export function readImagesFile(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new BadInputError(`cannot read --images-file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  return text.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean);
}
