/**
 * `prestage status [SETS..|--release VERSION]`: one row per node and set, as the cluster reports
 * it now; with --release, the verdict on that release (`ready VERSION` prints only the verdict).
 */
import yaml from 'js-yaml';
import type { Argv } from 'yargs';
import { setReady, type ProgressSnapshot } from '../cluster/backend.js';
import { setTimeout as sleepFor } from 'node:timers/promises';
import { columnsOf, isLiveTerminal } from '../terminal-line.js';
import { watchStatus } from './status-watch.js';
import { checkReleaseReady, parseReleaseVersion, ReleaseNotReadyError, releaseSnapshot } from '../cluster/release-lifecycle.js';
import { BadInputError } from '../errors.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { renderNames } from './documents.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { renderStatusTable } from './status-table.js';

/** How often `status -w` reads the cluster: the agents' status writes come a few seconds apart. */
const WATCH_INTERVAL_MS = 2_000;
const abortableSleep = (ms: number, signal: AbortSignal) => sleepFor(ms, undefined, { signal });

export function statusCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withKubeOptions(
        y
          .positional('sets', { type: 'string', array: true, describe: 'PinnedImageSet names' })
          .option('release', {
            type: 'string',
            coerce: parseReleaseVersion('--release'),
            describe: 'The sets of this release VERSION, then READY (exit 0) only when each is current on every node it targets, else NOT READY naming what is missing (exit 1)',
          })
          .option('output', { alias: 'o', choices: ['table', 'json', 'yaml', 'name'] as const, default: 'table' as const, describe: 'Output format; json, yaml: {backend, sets[] (name, exists, generation, nodes[]), pools[] (MCO), link (agent)}; name: pinnedimageset/NAME per set shown' })
          .option('watch', { alias: 'w', type: 'boolean', default: false, describe: 'Keep the table current, as kubectl get -w: on a terminal redrawn in place with a progress bar per set; piped, the table once, then each row that changes; until interrupted, or with --release until READY' })
          .check((argv) => {
            if (argv['watch'] && argv['output'] !== 'table') throw new BadInputError('--watch keeps the table current; leave out -o (or run status -o json without --watch)');
            if (argv['release'] !== undefined && (argv['sets'] as string[] | undefined)?.length) throw new BadInputError('name sets or --release VERSION, not both');
            return true;
          }),
      ),
    handler: async (args) => {
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      const release = args.release as string | undefined;
      const named = (args.sets as string[] | undefined)?.length ? (args.sets as string[]) : undefined;
      if (args.watch) {
        const read = () => (release !== undefined ? releaseSnapshot(client, backend, release) : backend.snapshot(named));
        const stop = new AbortController();
        const interrupt = () => stop.abort();
        process.once('SIGINT', interrupt);
        try {
          const last = await watchStatus({
            read, out: ctx.stdout, tty: isLiveTerminal(ctx.stdout), columns: columnsOf(ctx.stdout) ?? 80, intervalMs: WATCH_INTERVAL_MS, signal: stop.signal, sleep: abortableSleep,
            ...(release !== undefined ? { done: (snapshot: ProgressSnapshot) => snapshot.sets.length > 0 && snapshot.sets.every(setReady) } : {}),
          });
          if (release !== undefined && last && !stop.signal.aborted) ctx.stdout.write(`\n${checkReleaseReady(release, last)}\n`);
        } finally {
          process.off('SIGINT', interrupt);
        }
        return;
      }
      const snapshot = release !== undefined ? await releaseSnapshot(client, backend, release) : await backend.snapshot((args.sets as string[] | undefined)?.length ? args.sets : undefined);
      // As `wait` does: a named set the cluster does not have is bad input.
      const missing = snapshot.sets.filter((set) => !set.exists).map((set) => set.name);
      if (missing.length) throw new BadInputError(`no PinnedImageSet ${missing.join(', ')} on the cluster`);
      const result = { backend: backend.kind, ...snapshot };
      if (args.output === 'json') ctx.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      else if (args.output === 'yaml') ctx.stdout.write(yaml.dump(result, { lineWidth: -1, noRefs: true }));
      else if (args.output === 'name') ctx.stdout.write(renderNames('pinnedimageset', snapshot.sets.map((set) => set.name)));
      else if (snapshot.sets.length) ctx.stdout.write(renderStatusTable(snapshot));
      // NOT READY is the error line (exit 1); READY goes after the table.
      if (release !== undefined) {
        const ready = checkReleaseReady(release, snapshot);
        if (args.output === 'table') ctx.stdout.write(`\n${ready}\n`);
      }
    },
  });
}

/**
 * `prestage ready VERSION...`: only the verdict of `status --release VERSION`, for scripts and CI
 * gates; several versions (the hops of a path) answer one line each and exit 1 if any is not ready.
 */
export function readyCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    // Not `version`: that is yargs' --version.
    builder: (y: Argv) =>
      withKubeOptions(
        y
          .positional('release-version', { type: 'string', array: true, demandOption: true, coerce: (values: string[]) => values.map((v) => parseReleaseVersion('VERSION')(v)!), describe: 'Release version, e.g. 4.16.3; several: each hop of a path' })
          .option('output', { alias: 'o', choices: ['json', 'yaml'] as const, describe: 'Output format: the sets and nodes behind the verdict (as status -o; several versions: {backend, releases[]}); the verdict is the exit code, NOT READY also a line on stderr [default: the verdict line]' }),
      ),
    handler: async (args) => {
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      const versions = [...new Set(args['release-version'] as string[])];
      const results = await Promise.all(versions.map(async (version) => ({ backend: backend.kind, release: version, ...(await releaseSnapshot(client, backend, version)) })));
      const document = results.length === 1 ? results[0] : { backend: backend.kind, releases: results.map(({ backend: _, ...result }) => result) };
      if (args.output === 'json') ctx.stdout.write(`${JSON.stringify(document, null, 2)}\n`);
      else if (args.output === 'yaml') ctx.stdout.write(yaml.dump(document, { lineWidth: -1, noRefs: true }));
      const notReady: string[] = [];
      for (const result of results) {
        try {
          const verdict = checkReleaseReady(result.release, result);
          if (args.output === undefined) ctx.stdout.write(`${verdict}\n`);
        } catch (error) {
          if (!(error instanceof ReleaseNotReadyError)) throw error;
          notReady.push(error.message);
        }
      }
      if (notReady.length > 0) throw new ReleaseNotReadyError(notReady.join('; '));
    },
  });
}
