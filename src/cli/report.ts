/**
 * `prestage report [SETS..] --html FILE`: one self-contained page for a change ticket (nodes x
 * sets with state and bytes, the preflight's verdict, the link's use against its cap, errors
 * named); `-o json|yaml` the same numbers. Without --html and -o, a line per node x set.
 */
import { readFile, stat } from 'node:fs/promises';
import type { Argv } from 'yargs';
import yaml from 'js-yaml';
import { buildReport, eventSamples, ledgerSamples, type LinkUse } from '../cluster/report.js';
import { appliedSets } from '../cluster/preflight/read.js';
import { renderReportHtml } from '../render/report-html.js';
import { writeFileAtomic } from '../atomic-file.js';
import { BadInputError, OutputError } from '../errors.js';
import { agentNamespace } from '../agent/plan-link-meter.js';
import { count } from '../plural.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { linkRate } from './flag-values.js';
import { clusterFrom, withKubeOptions, type KubeFlags } from './kube-options.js';
import { withRegistryOptions } from './registry-options.js';
import { withStagingOptions } from './staging-options.js';
import { preflightOf, type PreflightFlags } from './preflight.js';
import { renderStatusTable } from './status-table.js';

/** A `wait -o json` event file is read up to this size. */
const MAX_EVENTS_BYTES = 64 * 2 ** 20;

export function reportCommand(ctx: CommandContext, scriptName: string) {
  return typedCommand({
    builder: (y: Argv) =>
      withStagingOptions(withRegistryOptions(withKubeOptions(y.positional('sets', { type: 'string', array: true, describe: 'Sets to report (default: every prestage set)' }))))
        .option('link-rate', { type: 'string', coerce: linkRate('link-rate'), describe: 'The slow link\'s rate or cap (bytes: 20MiB/s, 5MB/s; bits: 40Mbit/s, 40Mbps): the cap the link use is drawn against (default: the cap the agents report)' })
        .option('html', { type: 'string', describe: 'Write the report as one self-contained HTML file (no script, font, stylesheet or URL: it opens offline, on a phone, printed)' })
        .option('events', { type: 'string', describe: "A file of `wait -o json` output: its link events draw the link's use over time (default: the agents' ledger Lease, its last entries)" })
        .option('preflight', { type: 'boolean', default: true, describe: 'Include the preflight of the sets on the cluster (--no-preflight: the state only, no registry reads)' })
        .option('arch', { type: 'string', default: 'amd64', describe: 'Architecture of the images, for the preflight' })
        .option('output', { alias: 'o', choices: ['json', 'yaml'] as const, describe: 'Output format: json, yaml (kind StagingReport: cells[] per node and set, preflight, link samples, errors)' }),
    handler: async (args) => {
      const cluster = await clusterFrom(args as KubeFlags, scriptName);
      const { client, backend } = cluster;
      const names = (args.sets as string[] | undefined)?.length ? (args.sets as string[]) : undefined;
      const snapshot = await backend.snapshot(names);
      if (!snapshot.sets.length) throw new BadInputError('no prestage sets on the cluster to report; stage or apply some first');
      const preflight = args.preflight
        ? await preflightOf(client, backend, (await appliedSets(client, backend)).filter((set) => !names || names.includes(set.name)), [], true, args as unknown as PreflightFlags, ctx)
        : undefined;
      let link: LinkUse | undefined;
      if (args.events !== undefined) {
        const read = eventSamples(await readEvents(args.events));
        if (!read) ctx.log.warn(`--events ${args.events}: no link events (wait -o json writes them under a cap or through the cache)`);
        // The cap the events did not carry: the flag's, else the one the agents report now.
        const cap = read?.capBytesPerSecond ?? args['link-rate'] ?? snapshot.link?.capBytesPerSecond;
        link = read && cap ? { ...read, capBytesPerSecond: cap } : read;
      } else if (backend.kind === 'agent') {
        link = await ledgerSamples(client, await agentNamespace(client), args['link-rate'] ?? snapshot.link?.capBytesPerSecond);
      }
      const report = buildReport(backend.kind, snapshot, Date.now(), { ...(preflight ? { preflight } : {}), ...(link ? { link } : {}) });
      if (args.html !== undefined) {
        try {
          await writeFileAtomic(args.html, renderReportHtml(report));
        } catch (error) {
          throw new OutputError(`--html ${args.html}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}; name a file in a directory you can write`);
        }
        ctx.stderr.write(`wrote ${args.html}: ${count(report.nodes.length, 'node')} x ${count(report.sets.length, 'set')}${preflight ? `, ${preflight.verdict}` : ''}\n`);
      }
      if (args.output === 'json') ctx.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else if (args.output === 'yaml') ctx.stdout.write(yaml.dump(report, { lineWidth: -1, noRefs: true }));
      else if (args.html === undefined) ctx.stdout.write(renderStatusTable(snapshot) + (preflight ? `${preflight.verdict}: ${preflight.reasons.join('; ') || 'every node has the room'}\n` : ''));
    },
  });
}

async function readEvents(file: string): Promise<string> {
  try {
    if ((await stat(file)).size > MAX_EVENTS_BYTES) throw new BadInputError(`--events ${file}: larger than 64 MiB; give the tail of the wait -o json output`);
    return await readFile(file, 'utf8');
  } catch (error) {
    if (error instanceof BadInputError) throw error;
    throw new BadInputError(`--events ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}; name the file wait -o json wrote`);
  }
}
