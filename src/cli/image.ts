/**
 * `prestage image push REGISTRY/prestage:VERSION [--base REF] [--executable DIR]`: the agent image,
 * as `crane append` builds one (src/install/agent-image.ts): a base from a registry plus prestage's
 * own layer (the package on a Node.js base, or each platform's single executable on a base
 * without Node.js), for every platform the base offers, pushed with prestage's registry client.
 */
import { fileURLToPath } from 'node:url';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import { buildAppLayer, buildExecutableLayer, DEFAULT_AGENT_BASE, DEFAULT_EXECUTABLE_BASE, pushAgentImage, type AgentPayload, type AppLayer } from '../install/agent-image.js';
import { parseReference, type ImageReference } from '../registry/reference.js';
import { PushClient } from '../registry/upload.js';
import { exitCodesHelp, helpEpilogue } from './help.js';
import type { CommandContext } from './context.js';
import { registryClientFrom, retryLine, transportOptionsFrom, withRegistryOptions, type RegistryFlags } from './registry-options.js';
import { typedCommand } from './typed-command.js';
import { formatBytes } from '../units.js';
import { count } from '../plural.js';

/** The package root, from src/cli or dist/cli alike. */
const PACKAGE_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function imageCommand(ctx: CommandContext) {
  return {
    builder: (y: Argv) =>
      y
        .command(typedCommand({
          command: 'push <target>',
          describe: "Append prestage's layer (the package, or with --executable the single executable) to a base image for every platform it offers, and push it",
          builder: (sub: Argv) =>
            withRegistryOptions(
              sub
                .positional('target', { type: 'string', demandOption: true, describe: 'REGISTRY/REPOSITORY:TAG to push the agent image to' })
                .option('base', { type: 'string', describe: `The base image (a tag or digest; every linux platform of a list it offers is built) [default: ${DEFAULT_AGENT_BASE}; with --executable ${DEFAULT_EXECUTABLE_BASE}]` })
                .option('executable', { type: 'string', describe: 'The directory npm run dist wrote (dist-bin): lay its executable for each platform (linux-amd64/prestage, ...) on a base without Node.js, instead of the package on a Node.js base' })
                .epilogue(helpEpilogue(exitCodesHelp([3]), 'node-agent.md')),
            ),
          handler: async (args) => push(ctx, args),
        }))
        .demandCommand(1, 'name an image command (push)'),
    handler: () => undefined,
  };
}

/** `image push`'s flags. */
type PushFlags = RegistryFlags & { readonly target: string; readonly base?: string | undefined; readonly executable?: string | undefined };

async function push(ctx: CommandContext, args: PushFlags): Promise<void> {
  const target = referenceFlag(args.target, 'TARGET');
  if (!target.tag || target.digest) throw new BadInputError(`TARGET ${args.target} must name a tag and no digest, e.g. ${formatTarget(target)}:0.1.0: the tag is what install --image names`);
  const baseName: string = args.base ?? (args.executable ? DEFAULT_EXECUTABLE_BASE : DEFAULT_AGENT_BASE);
  const base = referenceFlag(baseName, '--base');
  const version = (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  const payload = args.executable ? await executablePayload(ctx, args.executable) : await packagePayload(ctx);
  const warn = (line: string) => ctx.log.warn(line);
  const reader = registryClientFrom({ ...args, mirror: [] }, (line) => warn(line), warn);
  const writer = new PushClient(target.registry, transportOptionsFrom(args, (event) => { if (event.kind === 'retry') warn(retryLine(event)); }, warn));
  try {
    const image = await pushAgentImage({
      base,
      target: { ...target, tag: target.tag },
      payload,
      reader,
      writer,
      version,
      onPlatform: (platform) => ctx.stderr.write(`${platform}: appending to ${baseName}\n`),
    });
    for (const platform of image.platforms) ctx.stderr.write(`${platform.platform}: ${platform.digest}\n`);
    if (image.skipped.length) ctx.log.warn(`${baseName} also offers ${image.skipped.join(', ')}: no executable for ${image.skipped.length === 1 ? 'it' : 'them'} in ${args.executable}, left out`);
    ctx.stdout.write(`${image.reference}\n`);
  } finally {
    await reader.close();
    await writer.close();
  }
}

/** The package under /app on a Node.js base: the same layer for every platform (no native modules). */
async function packagePayload(ctx: CommandContext): Promise<AgentPayload> {
  const layer = await buildAppLayer(PACKAGE_ROOT);
  ctx.stderr.write(`prestage layer: ${count(layer.files, 'file')}, ${formatBytes(layer.gzip.length)} compressed (${layer.digest})\n`);
  return { kind: 'package', layerFor: () => layer };
}

/** Each platform's single executable from `npm run dist`'s directory (`linux-amd64/prestage`, ...). */
async function executablePayload(ctx: CommandContext, dir: string): Promise<AgentPayload> {
  const layers = new Map<string, AppLayer>();
  const targets = existsSync(dir) ? readdirSync(dir).filter((name) => /^linux-[a-z0-9]+$/.test(name) && existsSync(join(dir, name, 'prestage'))) : [];
  if (!targets.length) throw new BadInputError(`--executable ${dir}: no linux-<arch>/prestage in it; run npm run dist and name its output directory (dist-bin)`);
  for (const target of targets) {
    const layer = await buildExecutableLayer(join(dir, target, 'prestage'));
    const platform = `linux/${target.slice('linux-'.length)}`;
    layers.set(platform, layer);
    ctx.stderr.write(`prestage executable for ${platform}: ${formatBytes(layer.gzip.length)} compressed (${layer.digest})\n`);
  }
  return { kind: 'executable', layerFor: (platform) => layers.get(platform) };
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
