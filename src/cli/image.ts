/**
 * `prestage image push REGISTRY/prestage:VERSION [--base REF]`: the agent image, as `crane append`
 * builds one (src/install/agent-image.ts): a Node.js base from a registry plus prestage's own layer,
 * for every platform the base offers, pushed with prestage's registry client.
 */
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import { buildAppLayer, DEFAULT_AGENT_BASE, pushAgentImage } from '../install/agent-image.js';
import { formatBytes } from '../render/table.js';
import { parseReference, type ImageReference } from '../registry/reference.js';
import { PushClient } from '../registry/upload.js';
import type { CommandContext } from './context.js';
import { registryClientFrom, retryLine, transportOptionsFrom, withRegistryOptions } from './registry-options.js';

/** The package root, from src/cli or dist/cli alike. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function imageCommand(ctx: CommandContext) {
  return {
    builder: (y: Argv) =>
      y
        .command({
          command: 'push <target>',
          describe: "Append prestage's layer to a Node.js base image for every platform it offers, and push it",
          builder: (sub: Argv) =>
            withRegistryOptions(
              sub
                .positional('target', { type: 'string', demandOption: true, describe: 'REGISTRY/REPOSITORY:TAG to push the agent image to' })
                .option('base', { type: 'string', default: DEFAULT_AGENT_BASE, describe: 'Node.js 20+ base image (a tag or digest; every linux platform of a list is built)' }),
            ),
          handler: async (args: any) => push(ctx, args),
        })
        .demandCommand(1, 'name an image command (push)'),
    handler: () => undefined,
  };
}

async function push(ctx: CommandContext, args: any): Promise<void> {
  const target = referenceFlag(args.target, 'TARGET');
  if (!target.tag || target.digest) throw new BadInputError(`TARGET ${args.target} must name a tag and no digest, e.g. ${formatTarget(target)}:0.1.0: the tag is what install --image names`);
  const base = referenceFlag(args.base, '--base');
  const version = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const layer = await buildAppLayer(PACKAGE_ROOT);
  ctx.stderr.write(`prestage layer: ${layer.files} files, ${formatBytes(layer.gzip.length)} compressed (${layer.digest})\n`);
  const warn = (line: string) => ctx.log.warn(line);
  const reader = registryClientFrom({ ...args, mirror: [] }, (line) => warn(line), warn);
  const writer = new PushClient(target.registry, transportOptionsFrom(args, (event) => { if (event.kind === 'retry') warn(retryLine(event)); }, warn));
  try {
    const image = await pushAgentImage({
      base,
      target: { ...target, tag: target.tag },
      layer,
      reader,
      writer,
      version,
      onPlatform: (platform) => ctx.stderr.write(`${platform}: appending to ${args.base}\n`),
    });
    for (const platform of image.platforms) ctx.stderr.write(`${platform.platform}: ${platform.digest}\n`);
    ctx.stdout.write(`${image.reference}\n`);
  } finally {
    await reader.close();
    await writer.close();
  }
}

function referenceFlag(text: string, what: string): ImageReference {
  try {
    return parseReference(text);
  } catch (error) {
    throw new BadInputError(`${what}: ${(error as Error).message}`);
  }
}

function formatTarget(reference: ImageReference): string {
  return `${reference.registry}/${reference.repository}`;
}
