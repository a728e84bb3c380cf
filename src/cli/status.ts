/**
 * `prestage status [SETS..|--release VERSION]`: one row per node and set, as the cluster reports
 * it now; with --release, the verdict on that release (`ready VERSION` prints only the verdict).
 */
import yaml from 'js-yaml';
import type { Argv } from 'yargs';
import type { ProgressSnapshot } from '../cluster/backend.js';
import { checkReleaseReady, parseReleaseVersion, ReleaseNotReadyError, releaseSnapshot } from '../cluster/release-lifecycle.js';
import { BadInputError } from '../errors.js';
import { table } from '../render/table.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { renderNames } from './documents.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { formatBytes } from '../units.js';

export function renderStatusTable(snapshot: ProgressSnapshot): string {
  const rows = snapshot.sets.flatMap((set) =>
    set.nodes.length
      ? set.nodes.map((n) => [
          n.node,
          set.name,
          `${n.currentGeneration}/${n.desiredGeneration}/${set.generation}`,
          n.phase,
          n.imagesTotal ? `${n.imagesDone ?? 0}/${n.imagesTotal}` : '',
          n.bytes ? `${formatBytes(n.pulledBytes ?? 0)}/${formatBytes(n.bytes)}` : '',
          n.error ?? '',
          n.note ?? n.unreported ?? '',
        ])
      : [['-', set.name, `-/-/${set.generation}`, set.exists ? 'no target nodes' : 'not found', '', '', '', '']],
  );
  const header = ['NODE', 'SET', 'GENERATION (CURRENT/DESIRED/SET)', 'STATE', 'IMAGES', 'BYTES', 'ERROR', 'NOTE'];
  // IMAGES and BYTES only where the backend reports them (the agent does, MCO does not); NOTE when any.
  const shown = header.map((_, c) => c < 4 || c === 6 || rows.some((r) => r[c])).map((keep, c) => (keep ? c : -1)).filter((c) => c >= 0);
  // MCO's own per-pool count: nodes whose every set is current, as the MachineConfigPool says.
  const pools = (snapshot.pools ?? []).map((p) => `pool ${p.name}: ${p.updatedMachineCount}/${p.machineCount} nodes have every PinnedImageSet${p.degraded ? `; degraded: ${p.degraded}` : ''}\n`);
  return `${table([header, ...rows].map((r) => shown.map((c) => r[c]!)))}\n${pools.length ? `\n${pools.join('')}` : ''}`;
}

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
          .check((argv) => {
            if (argv['release'] !== undefined && (argv['sets'] as string[] | undefined)?.length) throw new BadInputError('name sets or --release VERSION, not both');
            return true;
          }),
      ),
    handler: async (args) => {
      const { client, backend } = await clusterFrom(args as KubeFlags, scriptName);
      const release = args.release as string | undefined;
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
