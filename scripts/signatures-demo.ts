/**
 * The README's signature walk-through, with real output: the fixture release in a local
 * registry with a sigstore attachment for every image (a key made here), a GPG signature in a
 * local store (Debian's gpg), then `bundle create`, `verify`, `push` as a user runs them.
 * Usage: tsx scripts/signatures-demo.ts [WORK_DIR]
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture } from '../fixtures/release.js';
import type { Plan } from '../src/plan/types.js';
import { startRegistry } from '../test/harness/index.js';
import { generateGpgKey, signRelease, startSignatureStore } from '../test/support/release-signing.js';
import { generateSigstoreKeys, pushAttachments, signAttachment } from '../test/support/sigstore-signing.js';

const run = promisify(execFile);
const work = resolve(process.argv[2] ?? '/tmp/prestage-signatures-demo');
await mkdir(work, { recursive: true });
const bin = resolve(import.meta.dirname, '../bin/prestage.js');
const fixture = buildReleaseFixture();
const source = await startRegistry();
const mirror = await startRegistry();
await pushFixture(source.url, fixture);
const release = `quay.io/${fixture.truth.releaseRepository}:${fixture.truth.release.tag}`;
const from = ['--mirror', `quay.io=${source.host}`, '--insecure-registry', source.host];
/** Local hosts as a user's would read. */
let hosts = (text: string): string => text;
const prestage = async (args: string[], shown = args) => {
  console.log(`$ prestage ${shown.join(' ')}`);
  const r = await run(process.execPath, [bin, ...args], { cwd: work, maxBuffer: 64 << 20 }).catch((e: { stdout: string; stderr: string; code: number }) => e);
  process.stdout.write(hosts(r.stdout));
  process.stdout.write(hosts(r.stderr.split('\n').filter((l) => !/^bundled \d+\/|^pushed \d+\//.test(l)).join('\n')));
  console.log(`(exit ${'code' in r ? r.code : 0})\n`);
};
try {
  const plan = JSON.parse((await run(process.execPath, [bin, 'plan', release, ...from, '-o', 'json'], { maxBuffer: 64 << 20 })).stdout) as Plan;
  const cosign = generateSigstoreKeys();
  await writeFile(join(work, 'cosign.pub'), cosign.publicPem);
  const byRepo = new Map<string, Array<{ digest: string; attachment: ReturnType<typeof signAttachment> }>>();
  for (const { pullSpec } of [...plan.images, ...plan.skipped]) {
    const [name, digest] = pullSpec.split('@') as [string, string];
    byRepo.set(name.slice(8), [...(byRepo.get(name.slice(8)) ?? []), { digest, attachment: signAttachment(cosign, digest, `${name}@${digest}`) }]);
  }
  for (const [repo, signed] of byRepo) await pushAttachments(source.host, repo, signed);
  const key = await generateGpgKey('Release Signer');
  await writeFile(join(work, 'release-key.asc'), key.publicArmored);
  const stranger = await generateGpgKey('Somebody Else');
  await writeFile(join(work, 'other-key.asc'), stranger.publicArmored);
  const store = await startSignatureStore({ release: { [plan.release.digest]: [await signRelease(key, plan.release.digest, release)] } });
  const storeUrl = store.url('release');
  hosts = (text) => text.replaceAll(storeUrl, 'https://mirror.openshift.com/pub/openshift-v4/signatures/openshift/release').replaceAll(source.host, 'registry.connected').replaceAll(mirror.host, 'mirror.example.com:5000');
  const show = (args: string[]) => args.map(hosts);
  const create = ['bundle', 'create', release, '--output-dir', 'ocp-4.16.3', '--verification-key', 'release-key.asc', '--sigstore-key', 'cosign.pub', '--signature-store', storeUrl, ...from];
  const wrongKey = [...create.slice(0, 5), '--verification-key', 'other-key.asc', ...create.slice(7)];
  await prestage(wrongKey, show(wrongKey));
  await prestage(create, show(create));
  await prestage(['bundle', 'verify', 'ocp-4.16.3', '--sigstore-key', 'cosign.pub']);
  await prestage(['bundle', 'verify', 'ocp-4.16.3', '--verification-key', 'release-key.asc', '--sigstore-key', 'cosign.pub']);
  const push = ['bundle', 'push', 'ocp-4.16.3', mirror.host, '--insecure-registry', mirror.host, '--verification-key', 'release-key.asc'];
  await prestage(push, show(push));
  await store.stop();
} finally {
  await source.stop();
  await mirror.stop();
}
