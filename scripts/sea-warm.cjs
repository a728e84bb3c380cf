/**
 * `node scripts/sea-warm.cjs APP CACHE` (scripts/dist.ts, host target only): V8's code cache of
 * the single executable's application (APP: the `app.cjs` asset, the CommonJS wrapper around the
 * bundle), written to CACHE after running what a user runs most often and wants at once: help,
 * completion, the version command. A cache made right after compiling (SEA's `useCodeCache`)
 * holds only the top-level code; one made after running holds every function those runs
 * compiled. Run with no V8 flags: V8 rejects a cache made under other flags.
 */
'use strict';
const { readFileSync, writeFileSync } = require('node:fs');
const { Writable } = require('node:stream');
const { Script } = require('node:vm');

const [app, out] = process.argv.slice(2);
const script = new Script(readFileSync(app, 'utf8'), { filename: app });
const application = { exports: {} };
script.runInThisContext()(application.exports, require, application, app, __dirname);

const sink = () => new Writable({ write: (_chunk, _encoding, done) => done() });
const io = (scriptName) => ({ stdout: sink(), stderr: sink(), scriptName });

(async () => {
  const { main, completePlugin } = await application.exports.cli();
  // yargs prints completions with console.log.
  console.log = () => undefined;
  const runs = [['--help'], ['plan', '--help'], ['stage', '--help'], ['completion', 'bash'], ['--get-yargs-completions', 'prestage', 'pl'], ['--get-yargs-completions', 'prestage', 'plan', '--'], ['version'], ['plna']];
  for (const argv of runs) await main(argv, io('prestage'));
  await completePlugin(['st'], 'kubectl prestage', sink());
  writeFileSync(out, script.createCachedData());
  process.exit(0);
})();
