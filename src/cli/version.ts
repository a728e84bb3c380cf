/** `prestage version [-o json|yaml]`: what this prestage is (src/version.ts). */
import type { Argv } from 'yargs';
import yaml from 'js-yaml';
import { buildInfo } from '../version.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';

export function versionCommand(ctx: CommandContext) {
  return typedCommand({
    builder: (y: Argv) => y.option('output', { alias: 'o', choices: ['text', 'json', 'yaml'] as const, default: 'text' as const, describe: 'text: one line; json, yaml: version, commit, node, target, executable' }),
    handler: (args) => {
      const info = buildInfo();
      if (args.output === 'json') return void ctx.stdout.write(`${JSON.stringify(info)}\n`);
      if (args.output === 'yaml') return void ctx.stdout.write(yaml.dump(info));
      ctx.stdout.write(`prestage ${info.version} (commit ${info.commit}, Node.js ${info.node}, ${info.target}, ${info.executable ? 'single executable' : 'run by Node.js'})\n`);
    },
  });
}
