/**
 * `bundle push --dry-run`. A registry has no server-side dry run, so the modes mean:
 * `server`: the mirror is only read (HEAD of blobs, manifests and tags) and what it lacks is
 * reported as what would be sent; `--apply`'s ConfigMap goes to the API server with `dryRun=All`.
 * `client`: no request to the mirror or the cluster; everything the bundle holds is counted.
 * Neither writes a file (mapping, ImageDigestMirrorSet, ConfigMap) nor unpacks tar parts.
 */
import type { PushReport } from '../bundle/push.js';
import { BadInputError } from '../errors.js';
import { formatBytes } from '../units.js';
import { dryRunSuffix, type DryRun } from './dry-run.js';

export const PUSH_DRY_RUN_HELP = 'push. server: the mirror is only read (HEAD) and what it lacks is listed, --apply\'s ConfigMap is sent with dryRun=All; client: no request to the mirror or cluster; neither writes a file';

/** Tar parts are unpacked before a push reads them: a write a dry run does not make. */
export function refuseArchiveDryRun(bundle: string, archive: boolean): void {
  if (archive) throw new BadInputError(`--dry-run: ${bundle} is tar parts, and a dry run unpacks nothing; give the unpacked bundle directory, or push without --dry-run`);
}

export function renderPushDryRun(report: PushReport, o: { target: string; files: readonly string[]; dryRun: Exclude<DryRun, 'none'>; removeSignatures: boolean }): string {
  const { blobs, manifests, tags } = report;
  const present = o.dryRun === 'server';
  const lines = [
    `would push ${report.images.length} images to ${o.target}: blobs ${blobs.uploaded} to upload (${formatBytes(report.bytesUploaded)}), ${blobs.mounted} to mount${present ? `, ${blobs.present} present` : ''}; manifests ${manifests.pushed} to push${present ? `, ${manifests.present} present` : ''}; tags ${tags.written} to write${present ? `, ${tags.present} present` : ''}${dryRunSuffix(o.dryRun)}`,
    ...(report.releaseTags.length > 0 ? [`release ${report.releaseTags.join(' ')}`] : []),
    ...(o.removeSignatures ? [] : [`sigstore signatures: ${report.signatures.written} to tag${present ? `, ${report.signatures.present} present` : ''}`]),
    `would write ${o.files.join(', ')}`,
  ];
  return lines.map((line) => `${line}\n`).join('');
}

export function pushDryRunClosing(mode: Exclude<DryRun, 'none'>): string {
  return mode === 'server'
    ? 'Dry run (server): the mirror was only read and the cluster checked each change; nothing uploaded, tagged, applied or written.\n'
    : 'Dry run (client): nothing sent to the mirror or the cluster; nothing written.\n';
}
