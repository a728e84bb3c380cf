/**
 * docs/cli.md: every command's help as the commands print it, so the reference cannot drift
 * from them (`npm run docs:cli` writes it; cli-reference.test.ts fails when it differs).
 */
import { Writable } from 'node:stream';
import { COMMANDS } from './commands.js';
import { main } from './main.js';

/** What `prestage WORDS --help` prints, 100 columns wide (a pipe's width). */
async function helpOf(words: readonly string[]): Promise<string> {
  let text = '';
  const stdout = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  // yargs prints help with console.log.
  const log = console.log;
  console.log = (...args: unknown[]) => void (text += `${args.join(' ')}\n`);
  const code = await main([...words, '--help'], { stdout, stderr: stdout, scriptName: 'prestage' }).finally(() => (console.log = log));
  if (code !== 0) throw new Error(`prestage ${words.join(' ')} --help exited ${code}: ${text}`);
  return text.trimEnd();
}

/** The commands in the order help lists them, each subcommand after its command. */
function commandWords(): string[][] {
  return [...Object.entries(COMMANDS).flatMap(([name, d]) => [[name], ...(d.subcommands ?? []).map((sub) => [name, sub])]), ['completion']];
}

export async function renderCliReference(): Promise<string> {
  const sections = [['# prestage command reference', '', '*Generated from the commands themselves by `npm run docs:cli`; a test fails when it differs. Every page named by `More:` is shown by `prestage docs TOPIC`.*', '', '## prestage', '', '```text', await helpOf([]), '```'].join('\n')];
  for (const words of commandWords()) sections.push([`## prestage ${words.join(' ')}`, '', '```text', await helpOf(words), '```'].join('\n'));
  return `${sections.join('\n\n')}\n`;
}
