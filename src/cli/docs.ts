/** `prestage docs [TOPIC]`: the docs/ pages, from the executable itself (help ends by naming one). */
import type { Argv } from 'yargs';
import { BadInputError } from '../errors.js';
import type { CommandContext } from './context.js';
import { didYouMean } from './did-you-mean.js';
import { docsPages } from './docs-pages.js';

export function docsCommand(ctx: CommandContext, scriptName: string) {
  return {
    builder: (y: Argv) => y.positional('topic', { type: 'string', describe: 'The page, e.g. planning (docs/planning.md); none: the list of pages' }),
    handler: async (args: { topic?: string } & Record<string, unknown>) => {
      const pages = await docsPages();
      if (args.topic === undefined) {
        ctx.stdout.write(`Pages (${scriptName} docs TOPIC):\n${[...pages.keys()].map((topic) => `  ${topic}\n`).join('')}`);
        return;
      }
      const topic = args.topic.replace(/^docs\//, '').replace(/\.md$/, '');
      const page = pages.get(topic);
      if (page === undefined) {
        const meant = didYouMean(topic, [...pages.keys()]);
        throw new BadInputError(`docs: no page ${JSON.stringify(args.topic)}${meant ? ` (did you mean ${meant}?)` : ''}; \`${scriptName} docs\` lists them`);
      }
      ctx.stdout.write(page.endsWith('\n') ? page : `${page}\n`);
    },
  };
}
