/**
 * `prestage bundle create|verify|push`: carry what a plan needs into a disconnected site.
 * On the connected side `create` writes an OCI layout (optionally as tar parts); on the
 * other side `verify` checks it and `push` loads it into the site's mirror registry and
 * writes the ImageDigestMirrorSet that sends the cluster there.
 */
import { existsSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ArgumentsCamelCase, Argv } from 'yargs';
import { writeFileAtomic } from '../atomic-file.js';
import { archiveDirFor, ARCHIVE_INDEX_FILE, inventoryOfArchive, openArchive, tarBytes, writeArchive } from '../bundle/archive.js';
import { unpackArchive, unpackDestination } from '../bundle/unpack.js';
import { createBundle, type PreviousBundle } from '../bundle/create.js';
import { ensureWritableDir } from '../bundle/disk-space.js';
import { planBlobs, previousBundleBlobs, readPlanFile } from '../bundle/inputs.js';
import { BUNDLE_FILE, readBundle, type Bundle, type BundleMetadata } from '../bundle/layout.js';
import { parseMirrorTarget, renderImageDigestMirrorSet, renderMapping } from '../bundle/mirror.js';
import { pushBundle } from '../bundle/push.js';
import { renderSignatureConfigMap, SIGNATURE_CONFIGMAP_FILE, signatureConfigMap } from '../signatures/configmap.js';
import { checkBundle, describeProblem, inventoryOfDir } from '../bundle/verify.js';
import { connectCluster } from '../cluster/connect.js';
import { applyObject, applyServerSide } from '../install/apply.js';
import { withDryRunOption, type DryRun } from './dry-run.js';
import { PUSH_DRY_RUN_HELP, pushDryRunClosing, refuseArchiveDryRun, renderPushDryRun } from './push-dry-run.js';
import { checkAttachmentsOrFail, checkReleaseSignaturesOrFail, signatureLines, unsignedWarning, verifiedReader } from './bundle-signatures.js';
import { catalogLines, catalogResourceFiles, verifyCatalogs, writeCatalogResources } from './bundle-operators.js';
import { releaseSignaturesFor, signatureInputs, sigstoreKeyFrom, trustAnchors, withCreateSignatureOptions, withSignatureKeyOptions, withTrustOptions } from './signature-options.js';
import { attachmentEntries } from '../bundle/signatures.js';
import { BadInputError } from '../errors.js';
import { buildPlan } from '../plan/build.js';
import type { Plan } from '../plan/types.js';
import type { RegistryClient } from '../registry/client.js';
import { withAgentImage } from '../install/agent-image.js';
import { parseReference } from '../registry/reference.js';
import { PushClient } from '../registry/upload.js';
import { checkOutputDir } from '../render/output-dir.js';
import { exitCodesHelp, helpEpilogue } from './help.js';
import type { CommandContext } from './context.js';
import { typedCommand } from './typed-command.js';
import { example, isArchive } from './bundle-dir.js';
import { createCommand } from './bundle-create.js';
import { pushPathGraph } from './bundle-graph.js';
import { readPathIndex } from '../bundle/path-index.js';
import { progressModeFrom, withProgressOptions } from './progress-options.js';
import { integerAtLeast, linkRate, sizeAtLeast } from './flag-values.js';
import { planOptionsFrom, withPlanOptions, type PlanFlags } from './plan-options.js';
import { registryClientFrom, retryLine, transportOptionsFrom, withRegistryOptions } from './registry-options.js';
import { formatBytes } from '../units.js';
import { count, plural } from '../plural.js';
import { renderDocument } from './documents.js';

const MAPPING_FILE = 'mapping.txt';
const IDMS_FILE = 'image-digest-mirror-set.yaml';
const RELEASE_EXAMPLE = 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64';

export function bundleCommand(ctx: CommandContext) {
  return {
    command: 'bundle <command>',
    describe: 'Air-gapped bundles: create on a connected machine, verify and push into a mirror registry on the other side',
    builder: (y: Argv) =>
      y
        .command(createCommand(ctx))
        .command(verifyCommand(ctx))
        .command(pushCommand(ctx))
        .demandCommand(1, 'name a bundle command (create, verify, push)'),
    handler: () => undefined,
  };
}

function verifyCommand(ctx: CommandContext) {
  return typedCommand({
    command: 'verify <bundle>',
    describe: 'Re-hash every blob and check every image is complete; exit 2 naming each missing or corrupt blob',
    builder: (y: Argv) =>
      withTrustOptions(withSignatureKeyOptions(y))
        .positional('bundle', { type: 'string', demandOption: true, describe: 'Bundle directory, or the parts directory / parts.json of an archive' })
        .example(...example('$0 bundle verify ocp-4.16.3', 'Check a bundle directory'))
        .example(...example('$0 bundle verify ocp-4.16.3 --verification-key redhat-release.asc', 'Also verify the release signatures with the key you trust (the keys the bundle carries are never trusted)'))
        .example(...example('$0 bundle verify /media/usb/ocp-4.16.3.parts', 'Check tar parts where they are, without unpacking'))
        .option('output', { alias: 'o', choices: ['json', 'yaml'] as const, describe: 'Output format: json, yaml: one object {bundle, release, images, blobs, bytes, fromPrevious, problems[] (problem: missing|corrupt, role, digest, neededBy), releaseSignatures, sigstoreSignatures} (the signature lines as text says them); a damaged bundle is still exit 2 [default: lines]' })
        .epilogue(helpEpilogue(exitCodesHelp([[4, 'Kubernetes API failure or refusal (--kubeconfig: the keys the cluster trusts)']]), 'air-gapped-bundles.md')),
    handler: async (args) => {
      const path: string = args.bundle;
      const { bundle, inventory } = isArchive(path)
        ? await inventoryOfArchive(await openArchive(path))
        : { bundle: await readBundle(path), inventory: await inventoryOfDir(path) };
      const sigstoreKey = await sigstoreKeyFrom(args);
      const anchors = await trustAnchors(args);
      const report = await checkBundle(bundle, inventory);
      // In a machine format stdout carries one document, written once every check is done or one failed.
      const format = args.output;
      const out = format === undefined ? ctx.stdout : { write: (_text: string) => true };
      const document: Record<string, unknown> = { bundle: path, release: bundle.metadata.release.version, images: report.images, blobs: report.blobs, bytes: report.bytes, fromPrevious: report.fromPrevious, problems: report.problems };
      const emit = () => void (format !== undefined && ctx.stdout.write(renderDocument(format, document)));
      for (const problem of report.problems) out.write(`${describeProblem(problem)}\n`);
      if (report.problems.length > 0) {
        emit();
        const problems = (kind: string) => report.problems.filter((p) => p.problem === kind).length;
        throw new BadInputError(`bundle ${path} is damaged: ${problems('missing')} missing and ${problems('corrupt')} corrupt ${plural(report.problems.length, 'blob')} (listed on stdout); copy it again from the connected side, where \`prestage bundle create\` with the same arguments fetches only these`);
      }
      const fromPrevious = report.fromPrevious ? `; ${count(report.fromPrevious, 'blob')} provided by the previous bundle (${bundle.metadata.previous?.source})` : '';
      out.write(`bundle ${path}: ${count(report.images, 'image')}, ${count(report.blobs, 'blob')}, ${formatBytes(report.bytes)} verified${fromPrevious}\n`);
      const warning = unsignedWarning(bundle, path);
      if (warning) ctx.stderr.write(`${warning}\n`);
      const gpg = await checkReleaseSignaturesOrFail(bundle, inventory.read, anchors, path);
      if (gpg) out.write(`${gpg.line}\n`);
      if (gpg) document.releaseSignatures = gpg.line;
      const attachments = attachmentEntries(bundle).length;
      const sigstore = sigstoreKey ? await checkAttachmentsOrFail(bundle, inventory.read, sigstoreKey, args, path, format === undefined ? ctx : { ...ctx, stdout: ctx.stderr }) : attachments > 0 ? `sigstore signatures: ${count(attachments, 'attachment')} not checked (give --sigstore-key)` : undefined;
      if (sigstore !== undefined) out.write(`${sigstore}\n`);
      if (sigstore !== undefined) document.sigstoreSignatures = sigstore;
      const catalogs = await verifyCatalogs(bundle, inventory.read, isArchive(path) ? undefined : path, path);
      for (const line of catalogs) out.write(`${line}\n`);
      if (catalogs.length > 0) document.catalogs = catalogs;
      emit();
      if (gpg?.warning) ctx.stderr.write(`${gpg.warning}\n`);
    },
  });
}

function pushBuilder(y: Argv) {
  return (
      withRegistryOptions(withProgressOptions(
        y
          .positional('bundle', { type: 'string', demandOption: true, describe: 'Bundle directory, or the parts directory / parts.json of an archive (unpacked beside it first)' }))
          .positional('target', { type: 'string', demandOption: true, describe: 'Mirror REGISTRY[/PREFIX] (images go to REGISTRY/PREFIX/<source repository>), or a --mirror rule SOURCE=REGISTRY/PATH (images go where that rule reads them)' })
          .option('output-dir', { type: 'string', default: '.', describe: `Where to write ${MAPPING_FILE} and ${IDMS_FILE}` })
          .option('work-dir', { type: 'string', describe: 'Where to unpack tar parts (into DIR/<name>) when they sit on read-only media; default: beside parts.json' })
          .option('parallel', { type: 'number', default: 8, coerce: integerAtLeast('parallel', 1), describe: 'Blob and manifest operations at once' })
          .option('remove-signatures', { type: 'boolean', default: false, describe: 'Do not push the bundle\'s sigstore signatures (<repo>:sha256-<hex>.sig); a cluster that enforces them (4.21+) then cannot pull from the mirror' })
          .option('verification-key', { type: 'string', array: true, default: [] as string[], describe: 'Verify the bundle\'s release signatures with this OpenPGP public key before pushing (repeatable; default with --kubeconfig or --apply: the keys the cluster trusts now; never the keys the bundle carries)' })
          .option('allow-unverified-signatures', { type: 'boolean', default: false, describe: `Write ${SIGNATURE_CONFIGMAP_FILE} even when no trusted key verified the release signatures (checked for integrity only): the CVO still checks them with its own keys` })
          .option('apply', { type: 'boolean', default: false, describe: `Also apply ${SIGNATURE_CONFIGMAP_FILE} to the cluster (server-side), so \`oc adm upgrade --to-image\` needs no --force; the signatures are verified with the keys that cluster trusts first` })
          .option('kubeconfig', { type: 'string', describe: 'Kubeconfig of the cluster whose keys verify the release signatures (its verifier ConfigMaps), and for --apply' })
          .option('context', { type: 'string', describe: 'Kubeconfig context (with --kubeconfig, or for --apply)' })
          .option('dry-run', withDryRunOption(PUSH_DRY_RUN_HELP))
          .example(...example('$0 bundle push ocp-4.16.3 mirror.example.com:5000/ocp --ca-file ca.pem', 'Push under a prefix; plan from it with --mirror quay.io=mirror.example.com:5000/ocp'))
          .example(...example('$0 bundle push ocp-4.16.3 quay.io/openshift-release-dev=mirror.example.com:5000/ocp', 'Push where the same --mirror rule reads, e.g. ocp/ocp-release:4.16.3-x86_64'))
          .example(...example('$0 bundle push /media/dvd/ocp.parts mirror.example.com:5000/ocp --work-dir /var/tmp', 'Parts on read-only media: unpack them on a writable disk, then push'))
          .epilogue(helpEpilogue(exitCodesHelp([3, [4, 'Kubernetes API failure or refusal (--kubeconfig, --apply)']]), 'air-gapped-bundles.md')),
      )
  );
}

type PushArgs = ArgumentsCamelCase<ReturnType<typeof pushBuilder> extends Argv<infer U> ? U : never>;

function pushCommand(ctx: CommandContext) {
  return typedCommand({
    command: 'push <bundle> <target>',
    describe: 'Upload what the mirror registry lacks, then write mapping.txt and an ImageDigestMirrorSet; a path\'s bundles (bundle create --from --to) hop by hop, then its update graph',
    builder: pushBuilder,
    handler: async (args) => {
      if (args.mirror.length > 0) throw new BadInputError('--mirror does not apply to bundle push; name the mirror registry as the TARGET argument (REGISTRY[/PREFIX] or SOURCE=REGISTRY/PATH)');
      const path = isArchive(args.bundle) ? undefined : await readPathIndex(args.bundle);
      if (!path) return pushOne(ctx, args);
      for (const hop of path.hops) {
        ctx.stdout.write(`hop ${hop.from} -> ${hop.to}: ${join(args.bundle, hop.dir)}\n`);
        await pushOne(ctx, { ...args, bundle: join(args.bundle, hop.dir), 'output-dir': join(args['output-dir'], hop.dir) });
      }
      if (args['dry-run'] === 'none') for (const line of await pushPathGraph(path, args, (line) => ctx.log.warn(line))) ctx.stdout.write(`${line}\n`);
    },
  });
}

/** One bundle into the mirror, and the files that send the cluster there. */
async function pushOne(ctx: CommandContext, args: PushArgs): Promise<void> {
  const target = parseMirrorTarget(args.target);
  const dryRun = args['dry-run'] as DryRun;
  if (dryRun === 'none') await checkOutputDir(args['output-dir']);
  else refuseArchiveDryRun(args.bundle, isArchive(args.bundle));
  const bundle = await openForPush(args.bundle, args['work-dir'], ctx);
  const warning = unsignedWarning(bundle, args.bundle);
  if (warning) ctx.stderr.write(`${warning}\n`);
  // Before anything is sent: altered signatures must not reach the mirror or the cluster.
  const read = verifiedReader(bundle.dir);
  // A client dry run reads nothing from the cluster: only --verification-key files anchor.
  const anchors = await trustAnchors(dryRun === 'client' ? { ...args, kubeconfig: undefined, context: undefined } : args, dryRun !== 'client' && args.apply);
  const gpg = await checkReleaseSignaturesOrFail(bundle, read, anchors, args.bundle);
  const releaseSignatures = bundle.metadata.signatures?.release;
  // The CVO's ConfigMap carries only signatures a trusted key verified, or those the user lets through.
  const configMap = gpg && (gpg.anchored || args['allow-unverified-signatures']) && releaseSignatures
    ? signatureConfigMap(releaseSignatures.digest, await Promise.all(releaseSignatures.signatures.map((b) => read(b.digest))))
    : undefined;
  const cluster = args.apply && dryRun !== 'client' ? await connectCluster(args) : undefined;
  if (args.apply && !configMap && !(dryRun === 'client' && releaseSignatures)) throw new BadInputError(`--apply: bundle ${args.bundle} carries no release signature to apply; create it again with its signatures`);
  const client = new PushClient(target.registry, transportOptionsFrom(args, (e) => { if (e.kind === 'retry') ctx.log.warn(retryLine(e)); }, (line) => ctx.log.warn(line)));
  try {
    const report = await pushBundle(bundle, client, target, { concurrency: args.parallel, progressTo: ctx.stderr, progress: progressModeFrom(args, ctx.stderr), removeSignatures: args['remove-signatures'], ...(dryRun !== 'none' ? { dryRun } : {}) });
    if (dryRun !== 'none') {
      ctx.stdout.write(renderPushDryRun(report, { target: args.target, files: [MAPPING_FILE, IDMS_FILE, ...(configMap ? [SIGNATURE_CONFIGMAP_FILE] : []), ...catalogResourceFiles(report)].map((f) => join(args['output-dir'], f)), dryRun, removeSignatures: args['remove-signatures'] }));
      if (args.apply && configMap) ctx.stdout.write(`configmap/${configMap.metadata.name} ${cluster ? await applyObject(cluster, configMap, dryRun) : 'would be applied (client dry run)'} (namespace ${configMap.metadata.namespace})\n`);
      if (args.apply && !configMap) ctx.stdout.write(`configmap ${SIGNATURE_CONFIGMAP_FILE} not checked: a client dry run reads no cluster keys to verify the release signatures with (give --verification-key)\n`);
      if (gpg) ctx.stdout.write(`${gpg.line}\n`);
      ctx.stdout.write(pushDryRunClosing(dryRun));
      return;
    }
    const name = `prestage-${bundle.metadata.release.version}`;
    await writeFileAtomic(join(args['output-dir'], MAPPING_FILE), renderMapping(report.images));
    await writeFileAtomic(join(args['output-dir'], IDMS_FILE), renderImageDigestMirrorSet(name, report.images));
    const { blobs, manifests } = report;
    const { tags } = report;
    ctx.stdout.write(`pushed ${count(report.images.length, 'image')} to ${args.target}: blobs ${blobs.uploaded} uploaded (${formatBytes(report.bytesUploaded)}), ${blobs.mounted} mounted, ${blobs.present} present; manifests ${manifests.pushed} pushed, ${manifests.present} present; tags ${tags.written} written, ${tags.present} present; in ${report.seconds.toFixed(1)} s\n`);
    if (report.releaseTags.length > 0) ctx.stdout.write(`release ${report.releaseTags.join(' ')}\n`);
    ctx.stdout.write(`wrote ${join(args['output-dir'], MAPPING_FILE)} and ${join(args['output-dir'], IDMS_FILE)} (ImageDigestMirrorSet ${name})\n`);
    for (const line of await writeCatalogResources(report, args['output-dir'])) ctx.stdout.write(`${line}\n`);
    if (!args['remove-signatures']) ctx.stdout.write(`sigstore signatures: ${report.signatures.written} tagged, ${report.signatures.present} present\n`);
    if (gpg) ctx.stdout.write(`${gpg.line}\n`);
    if (gpg && !configMap) ctx.stdout.write(`${SIGNATURE_CONFIGMAP_FILE} not written: no trusted key verified the release signatures (give --verification-key or --kubeconfig, or --allow-unverified-signatures)\n`);
    if (configMap) {
      await writeFileAtomic(join(args['output-dir'], SIGNATURE_CONFIGMAP_FILE), renderSignatureConfigMap(configMap));
      const count = Object.keys(configMap.binaryData).length;
      const unverified = gpg?.anchored ? '' : ', NOT verified against a trusted key: --allow-unverified-signatures';
      ctx.stdout.write(`wrote ${join(args['output-dir'], SIGNATURE_CONFIGMAP_FILE)} (ConfigMap ${configMap.metadata.namespace}/${configMap.metadata.name}, ${count} signature${count === 1 ? '' : 's'}${unverified})\n`);
    }
    if (cluster && configMap) {
      await applyServerSide(cluster, [configMap]);
      ctx.stdout.write(`applied ConfigMap ${configMap.metadata.namespace}/${configMap.metadata.name}: the cluster verifies release ${bundle.metadata.release.version} without --force\n`);
    }
    if (gpg?.warning) ctx.stderr.write(`${gpg.warning}\n`);
  } finally {
    await client.close();
  }
}

/**
 * A layout directory as is (push only reads it); an archive is unpacked beside its parts, or
 * under `--work-dir` when they sit on read-only media, resuming an earlier unpack: into
 * `<layout>` of that directory and nowhere else.
 */
async function openForPush(path: string, workDir: string | undefined, ctx: CommandContext): Promise<Bundle> {
  if (!isArchive(path)) return readBundle(path);
  const archive = await openArchive(path);
  const dir = await unpackDestination(workDir ?? archive.dir, archive.index.layout);
  const room = `with room for ${formatBytes(archive.index.bytes)}`;
  await ensureWritableDir(dir, 'the unpacked bundle', workDir === undefined
    ? `pass --work-dir DIR, a writable directory ${room}, to unpack the parts there`
    : `choose a writable --work-dir ${room}`);
  ctx.stderr.write(`unpacking ${count(archive.index.parts.length, 'part')} into ${dir}\n`);
  await unpackArchive(archive, dir);
  return readBundle(dir);
}
