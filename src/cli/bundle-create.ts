/**
 * `prestage bundle create SOURCE | --to VERSION [--from VERSION]`: the images of a plan into an
 * OCI layout. A path of several hops (`--to` over the update graph) is one bundle per hop in
 * DIR/VERSION, each after the first carrying only the blobs the hops before it did not (as
 * `--since`), so every layer shared between hops crosses the air gap once; DIR/prestage-path.json
 * lists the hops in the order `bundle push DIR` pushes them.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { archiveDirFor, ARCHIVE_INDEX_FILE, inventoryOfArchive, openArchive, tarBytes, writeArchive } from '../bundle/archive.js';
import { createBundle, type PreviousBundle } from '../bundle/create.js';
import { ensureWritableDir } from '../bundle/disk-space.js';
import { planBlobs, previousBundleBlobs, readPlanFile } from '../bundle/inputs.js';
import { BUNDLE_FILE, type Bundle, type BundleMetadata } from '../bundle/layout.js';
import { PATH_INDEX_FILE, writePathIndex, type PathIndex } from '../bundle/path-index.js';
import { BadInputError } from '../errors.js';
import { readImageSetConfiguration } from '../config/image-set-config.js';
import { withAgentImage, withCarriedImage } from '../install/agent-image.js';
import { buildPlan } from '../plan/build.js';
import { planPath, type PathPlan } from '../plan/path-plan.js';
import type { Plan } from '../plan/types.js';
import type { RegistryClient } from '../registry/client.js';
import { parseReference } from '../registry/reference.js';
import { count } from '../plural.js';
import { formatBytes } from '../units.js';
import { catalogLines } from './bundle-operators.js';
import { checkAttachmentsOrFail, signatureLines, verifiedReader } from './bundle-signatures.js';
import { bundleDirFrom, example, isArchive, isDirectory, isFile, toIsNoDirectory, withBundleDirOption } from './bundle-dir.js';
import type { CommandContext } from './context.js';
import { integerAtLeast, linkRate, sizeAtLeast } from './flag-values.js';
import { exitCodesHelp, helpEpilogue } from './help.js';
import { targetToPlan, withPathOptions } from './path-options.js';
import { planOptionsFrom, withPlanOptions, withToOptions, type PlanFlags } from './plan-options.js';
import { progressModeFrom, withProgressOptions } from './progress-options.js';
import { registryClientFrom, withRegistryOptions } from './registry-options.js';
import { releaseSignaturesFor, signatureInputs, sigstoreKeyFrom, withCreateSignatureOptions } from './signature-options.js';
import { typedCommand } from './typed-command.js';

/** The base oc-mirror builds its graph image on. */
const GRAPH_BASE_IMAGE = 'registry.access.redhat.com/ubi9/ubi:latest';
const RELEASE_EXAMPLE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';

function createBuilder(y: Argv) {
  return (
      withPathOptions(withToOptions(withPlanOptions(withRegistryOptions(withCreateSignatureOptions(withProgressOptions(withBundleDirOption(
        y
          .positional('source', { type: 'string', describe: 'Release pullspec (planned as `prestage plan` does), or a plan file from `prestage plan -o json` (or --to VERSION)' })))
          .option('since', { type: 'string', describe: 'Leave out blobs a previous bundle carried: its directory, its parts, a plan file or a release pullspec' })
          .option('all-platforms', { type: 'boolean', default: false, describe: 'Keep every platform of manifest lists (registries that require complete lists)' })
          .option('max-archive-size', { type: 'string', coerce: sizeAtLeast('max-archive-size', 2 ** 20), describe: 'Also write the bundle as tar parts of at most SIZE into <output-dir>.parts/: 4G (10^9 bytes: under FAT32\'s 4 GiB), 4Gi, 4300MB, 25GB; at least 1Mi' })
          .option('parallel', { type: 'number', default: 32, coerce: integerAtLeast('parallel', 1), describe: 'Connections at once for manifests and blobs (small blobs need many in flight to fill a link; big blobs, one per Range part, get a quarter of them while small ones are left)' })
          .option('force', { type: 'boolean', default: false, describe: 'Replace a bundle of another release (or a layout prestage did not write) in --output-dir' })
          .option('link-rate', { type: 'string', coerce: linkRate('link-rate'), describe: 'Read blobs no faster than RATE in all (bytes: 20MiB/s, 5MB/s, 20Mi; bits: 40Mbit/s, 40Mbps), leaving the rest of a shared link to others; manifests are not counted' })
          .option('graph-base-image', { type: 'string', describe: `With a path (--from, --to): the base of the update graph image bundle push builds for an OpenShift Update Service (it runs bash and cp, as oc-mirror's does); carried in the first hop's bundle; '' carries no graph image [default: ${GRAPH_BASE_IMAGE}; with --config, only when its mirror.platform.graph is true]` })
          .option('agent-image', { type: 'string', describe: 'Also carry the prestage agent image (`prestage image push`), e.g. registry.example.com/prestage:0.1.0; push mirrors it by digest' })
          .example(...example(`$0 bundle create ${RELEASE_EXAMPLE} --output-dir ocp-4.16.3 --verification-key redhat-release.asc`, 'Bundle a release with its GPG signatures (verified with the key) and sigstore signatures'))
          .example(...example(`$0 bundle create ${RELEASE_EXAMPLE} --output-dir ocp-4.16.3`, 'Bundle a release; rerun the same command to resume or repair it'))
          .example(...example('$0 bundle create plan.json --output-dir ocp-4.16.3 --max-archive-size 4G', 'Bundle a plan file, also as 4 GiB tar parts in ocp-4.16.3.parts/'))
          .example(...example('$0 bundle create plan-4.16.4.json --output-dir ocp-4.16.4 --since ocp-4.16.3', 'Carry only what the 4.16.3 bundle did not'))
          .example(...example(`$0 bundle create ${RELEASE_EXAMPLE} --output-dir ocp-4.16.3 --link-rate 50Mbit/s`, 'Leave the rest of a shared link to others: blobs at 50 Mbit/s in all'))
          .example(...example('$0 bundle create --from 4.16.3 --to 4.18.2 --channel eus-4.18 --graph https://api.openshift.com/api/upgrades_info/v1/graph --output-dir ocp-path --verification-key redhat-release.asc', 'Every hop of the path, one bundle per hop in ocp-path/VERSION, each layer once'))
          .epilogue(helpEpilogue(exitCodesHelp([3]), 'air-gapped-bundles.md')),
      ))), toIsNoDirectory, 'source'))
  );
}

export function createCommand(ctx: CommandContext) {
  return typedCommand({
    command: 'create [source]',
    describe: 'Write every image a plan needs (each blob once, digests verified) into an OCI layout; reruns resume',
    builder: createBuilder,
    handler: async (args) => {
      const dir = bundleDirFrom(args);
      const target = args.to !== undefined ? await targetToPlan({ ...args, release: undefined }, (line) => ctx.log.warn(line)) : { release: args.source! };
      if ('path' in target) {
        if (args.since !== undefined) throw new BadInputError(`--since: a path's bundles carry each blob once already (each hop after the first leaves out what the hops before it carry); bundle the path without --since`);
        const layerSizes = new Map();
        const signing = await signatureInputs(args);
        const client = registryClientFrom(args, (line) => ctx.log.warn(line), (line) => ctx.log.warn(line));
        client.rememberManifests();
        try {
          const path = await planPath(target.path, (hop) => buildPlan(client, { ...planOptionsFrom(args, hop.pullSpec), layerSizes }));
          ctx.stdout.write(`path ${[path.from, ...path.hops.map((hop) => hop.to)].join(' -> ')}: ${count(path.hops.length, 'bundle')} in ${dir}\n`);
          const config = args.config !== undefined ? readImageSetConfiguration(args.config) : undefined;
          const graphBaseImage = args['graph-base-image'] ?? (config?.platform && !config.platform.graph ? '' : GRAPH_BASE_IMAGE);
          const carried = new Set<string>();
          let graphBase: string | undefined;
          for (const [i, hop] of path.hops.entries()) {
            const previous = carried.size > 0 ? { source: `the hops before ${hop.to} in ${dir}`, blobs: new Set(carried) } : undefined;
            let plan = hop.plan;
            if (i === 0 && graphBaseImage) {
              const base = await withCarriedImage(client, plan, graphBaseImage, { flag: '--graph-base-image', name: 'graph-base', why: `the base of the update graph image (${graphBaseImage}), carried by --graph-base-image`, arch: args.arch });
              ({ plan } = base);
              graphBase = base.pullSpec;
            }
            await createOne(ctx, args, client, { dir: join(dir, hop.to), plan, releaseTag: undefined, previous, signing });
            for (const digest of planBlobs(plan)) carried.add(digest);
          }
          await writePathIndex(dir, { ...pathIndexOf(path), ...(graphBase ? { graphBase } : {}) });
          ctx.stdout.write(`wrote ${join(dir, PATH_INDEX_FILE)} and the update graph data: bundle push ${dir} pushes the hops in order\n`);
        } finally {
          await client.close();
        }
        return;
      }
      const source = target.release;
      const sourceIsFile = isFile(source);
      const planFromFile = sourceIsFile ? await readPlanFile(source) : undefined;
      const signing = await signatureInputs(args);
      const client = registryClientFrom(args, (line) => ctx.log.warn(line), (line) => ctx.log.warn(line));
      // The bundle reads again the manifests its plan (or --since's) read.
      client.rememberManifests();
      try {
        const planned = planFromFile ?? await buildPlan(client, planOptionsFrom(args, source));
        const previous = args.since !== undefined ? await previousBundle(args.since, client, args) : undefined;
        await createOne(ctx, args, client, { dir, plan: planned, releaseTag: sourceIsFile ? undefined : parseReference(source).tag, previous, signing });
      } finally {
        await client.close();
      }
    },
  });
}

/** The flags createCommand's builder declares. */
type CreateArgs = ArgumentsCamelCase<ReturnType<typeof createBuilder> extends Argv<infer U> ? U : never>;

interface OneBundle {
  readonly dir: string;
  readonly plan: Plan;
  readonly releaseTag: string | undefined;
  readonly previous: PreviousBundle | undefined;
  readonly signing: Awaited<ReturnType<typeof signatureInputs>>;
}

/** One release's bundle into `dir`: its signatures first, then every blob, then the tar parts. */
async function createOne(ctx: CommandContext, args: CreateArgs, client: RegistryClient, one: OneBundle): Promise<void> {
  const { dir, previous, signing } = one;
  const maxPartBytes: number | undefined = args['max-archive-size'];
  await ensureWritableDir(dir, 'the bundle', 'choose another --output-dir');
  if (maxPartBytes) await ensureWritableDir(archiveDirFor(dir), 'the bundle parts', 'choose another --output-dir');
  const sigstoreKey = await sigstoreKeyFrom(args);
  const planned = one.plan;
  const namedBy = one.releaseTag;
  const planOptions = { operators: planOptionsFrom(args, one.plan.release.pullSpec).operators };
  const plan = args['agent-image'] ? await withAgentImage(client, planned, args['agent-image']) : planned;
  // Before any blob: a release the cluster would refuse is not worth gigabytes.
  const releaseSignatures = await releaseSignaturesFor(plan.release, args, signing, (line) => ctx.stderr.write(`${line}\n`));
  // Checked before index.json is written: a bundle whose attachments CRI-O would refuse is never complete.
  let sigstoreLine: string | undefined;
  const beforeComplete = sigstoreKey
    ? async (index: Bundle['index']) => {
      const metadata = JSON.parse(await readFile(join(dir, BUNDLE_FILE), 'utf8')) as BundleMetadata;
      sigstoreLine = await checkAttachmentsOrFail({ index, metadata }, verifiedReader(dir), sigstoreKey, args, dir, ctx);
    }
    : undefined;
  const report = await createBundle(client, plan, {
    dir,
    force: args.force,
    ...(namedBy !== undefined ? { releaseTag: namedBy } : {}),
    allPlatforms: args['all-platforms'],
    ...(previous ? { previous } : {}),
    // The lanes count connections; one registry gives no more than --max-concurrency at once.
    concurrency: Math.min(args.parallel, args['max-concurrency']),
    ...(maxPartBytes ? { extraBytes: (layout: { bytes: number; files: number }) => tarBytes(layout.bytes, layout.files) } : {}),
    progressTo: ctx.stderr,
    progress: progressModeFrom(args, ctx.stderr),
    sigstore: !args['remove-signatures'],
    releaseSignatures,
    ...(args['link-rate'] !== undefined ? { linkRate: args['link-rate'] as number } : {}),
    ...(beforeComplete ? { beforeComplete } : {}),
    catalogSelections: planOptions.operators ?? [],
    warn: (line) => ctx.log.warn(line),
  });
  const again = [report.resumedBlobs ? `${report.resumedBlobs} resumed` : '', report.repairedBlobs ? `${report.repairedBlobs} damaged, fetched again` : ''].filter(Boolean).join(', ');
  const cap = args['link-rate'] !== undefined ? ` at ${formatBytes(args['link-rate'])}/s cap` : '';
  const fetched = `fetched ${formatBytes(report.fetchedBytes)} in ${count(report.fetchedBlobs, 'blob')}${again ? ` (${again})` : ''} in ${report.seconds.toFixed(1)} s${cap}`;
  const fromPrevious = report.previousBlobs ? `; ${count(report.previousBlobs, 'blob')} left to the previous bundle` : '';
  ctx.stdout.write(`bundle ${dir}: ${count(report.images, 'image')}, ${count(report.blobs, 'blob')}, ${formatBytes(report.bytes)}; ${fetched}${fromPrevious}\n`);
  for (const line of [...signatureLines(plan.release, report.signatures), ...catalogLines(report.catalogs)]) ctx.stdout.write(`${line}\n`);
  if (sigstoreLine) ctx.stdout.write(`${sigstoreLine}\n`);
  if (maxPartBytes) {
    const archiveDir = archiveDirFor(dir);
    const archive = await writeArchive(dir, archiveDir, maxPartBytes);
    ctx.stdout.write(`archive ${join(archiveDir, ARCHIVE_INDEX_FILE)}: ${count(archive.parts.length, 'part')}, ${formatBytes(archive.bytes)}\n`);
  }
}

/** What bundle push reads of a path: its hops in order, each bundle's directory, the channel. */
function pathIndexOf(path: PathPlan): PathIndex {
  return {
    apiVersion: path.apiVersion,
    kind: 'BundlePath',
    from: path.from,
    to: path.to,
    channel: path.channel ?? `stable-${path.to.split('.').slice(0, 2).join('.')}`,
    hops: path.hops.map((hop) => ({ from: hop.from, to: hop.to, dir: hop.to, pullSpec: hop.pullSpec, risks: hop.risks })),
  };
}

/** `--since`: a bundle directory, an archive, a plan file, or a release to plan. */
async function previousBundle(since: string, client: RegistryClient, args: PlanFlags): Promise<PreviousBundle> {
  if (isArchive(since)) {
    const { bundle, inventory } = await inventoryOfArchive(await openArchive(since));
    return { source: since, blobs: new Set([...inventory.verified.keys(), ...(bundle.metadata.previous?.blobs.map((b) => b.digest) ?? [])]) };
  }
  if (isDirectory(since)) return { source: since, blobs: await previousBundleBlobs(since) };
  const plan: Plan = isFile(since) ? await readPlanFile(since) : await buildPlan(client, planOptionsFrom(args, since));
  return { source: since, blobs: planBlobs(plan) };
}

