/** `prestage version [-o json]`: what this prestage is (src/version.ts). */
import type { Argv } from 'yargs';
import { buildInfo } from '../version.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';

export function versionCommand(ctx: CommandContext) {
  return typedCommand({
    builder: (y: Argv) => y.option('output', { alias: 'o', choices: ['text', 'json'] as const, default: 'text' as const, describe: 'text: one line; json: version, commit, node, target, executable' }),
    handler: (args) => {
      const info = buildInfo();
      if (args.output === 'json') return void ctx.stdout.write(`${JSON.stringify(info)}\n`);
      ctx.stdout.write(`prestage ${info.version} (commit ${info.commit}, Node.js ${info.node}, ${info.target}, ${info.executable ? 'single executable' : 'run by Node.js'})\n`);
    },
  });
}
