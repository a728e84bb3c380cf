/**
 * One output flag, as kubectl's: `-o FORMAT`, `-oFORMAT`, `--output FORMAT`, `--output=FORMAT`;
 * the last one given wins (kubectl's habit: a script appending `-o json` to a line that already
 * says `-o yaml` gets JSON).
 */
/**
 * The arguments with `-oFORMAT` split as `-o FORMAT` (yargs reads `-oyaml` as the short flags
 * -o -y -a -m -l) and every output flag but the last dropped. Nothing after `--` is touched.
 */
export function normalizeOutputFlag(argv: readonly string[]): string[] {
  const words: string[] = [];
  let last: { readonly at: number; readonly words: readonly string[] } | undefined;
  const end = argv.indexOf('--') < 0 ? argv.length : argv.indexOf('--');
  for (let i = 0; i < end; i++) {
    const word = argv[i]!;
    let flag: string[] | undefined;
    if (word === '-o' || word === '--output') flag = i + 1 < end ? [word, argv[++i]!] : [word];
    else if (/^-o[^-]/.test(word)) flag = ['-o', word.slice(2).replace(/^=/, '')];
    else if (word.startsWith('--output=')) flag = [word];
    if (!flag) {
      words.push(word);
      continue;
    }
    last = { at: words.length, words: flag };
  }
  if (last) words.splice(last.at, 0, ...last.words);
  return [...words, ...argv.slice(end)];
}
