/**
 * `npm run accuracy`: how close `prestage plan` comes to what each role of a real cluster runs,
 * on the fixture release served by a real registry. The truth comes from the fixture's truth
 * columns (where each component really runs, its platforms, its capability), never from the
 * planner's rules. Prints, for AWS with the default capabilities: the worker set against the
 * truth (missing, extra), the control-plane set's missing images, the bytes a worker saves
 * against everything-on-every-node; and for `--capability-set None`, capability-gated images
 * planned (must be 0). Then the 4.20-style and 5.0-style releases (fixtures/eras.ts) for each
 * scenario (Default, TechPreviewNoUpgrade, capability set None, the HyperShift profile): the
 * applied-image set against the truth (must be equal), per role on AWS (0 missing, at most 10 %
 * extra on workers), and the bytes per node the OS-stream rule saves. Second section, live-cluster mode: the test bed's kube-apiserver with
 * OpenShift's ClusterVersion and Infrastructure CRDs, running the fixture's simulated 4.16.2
 * cluster; the plan of the upgrade to 4.16.3 against what each role runs (must be exact).
 * Exits 1 when a target is missed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pushFixture } from '../fixtures/push.js';
import { buildReleaseFixture, type RoleTruth } from '../fixtures/release.js';
import { registryClientFrom } from '../src/cli/registry-options.js';
import { buildPlan, type PlanOptions } from '../src/plan/build.js';
import { DEFAULT_FEATURE_SET, DEFAULT_PROFILE } from '../src/plan/inclusion.js';
import type { Plan } from '../src/plan/types.js';
import { liveTruth, simulatedCluster } from '../fixtures/live-cluster.js';
import { readLiveCluster } from '../src/cluster/live-cluster.js';
import { KubeClient } from '../src/kube/client.js';
import { startCluster } from '../test/cluster/index.js';
import { startRegistry } from '../test/harness/index.js';
import { installOpenShiftCrds, OPENSHIFT_4_21 } from '../test/mco/crds.js';
import { buildEraFixture, ERAS, SCENARIOS } from '../fixtures/eras.js';
import { loadSimulatedCluster } from '../test/support/simulated-cluster.js';

const fixture = buildReleaseFixture();
const eras = ERAS.map((era) => buildEraFixture(era));
const { truth } = fixture;
const storage = await mkdtemp(join(tmpdir(), 'prestage-accuracy-'));
const registry = await startRegistry({ storageDir: join(storage, 'storage') });
let failed = false;
try {
  await pushFixture(registry.url, fixture);
  for (const era of eras) await pushFixture(registry.url, era);
  const plan = async (extra: Partial<PlanOptions>): Promise<Plan> => {
    const client = registryClientFrom({ 'insecure-registry': [registry.host], 'tls-verify': true, mirror: [`quay.io=${registry.host}`], retries: 3, 'max-concurrency': 16, 'stall-timeout': 60 }, undefined, (line) => console.error(line));
    try {
      return await buildPlan(client, {
        release: `quay.io/${truth.releaseRepository}:${truth.release.tag}`,
        arch: 'amd64', profile: DEFAULT_PROFILE, featureSet: DEFAULT_FEATURE_SET, capabilitySet: 'vCurrent', additionalCapabilities: [], exclude: [],
        controlPlaneOnly: [], allNodes: [], extraImages: [], extraRole: 'all', namePrefix: 'prestage', ...extra,
      });
    } finally {
      await client.close();
    }
  };
  const setImages = (p: Plan, role: 'worker' | 'control-plane') => new Set(p.sets.filter((s) => s.role === role).flatMap((s) => s.images));
  const diskOf = (p: Plan, role: 'worker' | 'control-plane') => p.sets.filter((s) => s.role === role).reduce((a, s) => a + s.diskBytes, 0);
  const nameOf = new Map(truth.components.map((c) => [c.pullSpec, c.name]));
  const compare = (planned: Set<string>, wanted: readonly string[]) => ({
    missing: wanted.filter((p) => !planned.has(p)).map((p) => nameOf.get(p) ?? p),
    extra: [...planned].filter((p) => !wanted.includes(p)).map((p) => nameOf.get(p) ?? p).sort(),
  });
  const report = (label: string, p: Plan, want: RoleTruth): void => {
    const worker = compare(setImages(p, 'worker'), want.worker);
    const cp = compare(setImages(p, 'control-plane'), want.controlPlane);
    const extraPct = (100 * worker.extra.length) / want.worker.length;
    console.log(`${label}`);
    console.log(`  worker set: ${setImages(p, 'worker').size} images, truth ${want.worker.length}: ${worker.missing.length} missing${worker.missing.length ? ` (${worker.missing.join(', ')})` : ''}, ${worker.extra.length} extra (${extraPct.toFixed(1)}%)${worker.extra.length ? `: ${worker.extra.join(', ')}` : ''}`);
    console.log(`  control-plane set: ${setImages(p, 'control-plane').size} images, truth ${want.controlPlane.length}: ${cp.missing.length} missing${cp.missing.length ? ` (${cp.missing.join(', ')})` : ''}, ${cp.extra.length} extra`);
    console.log(`  skipped: ${p.skipped.length} images in no set`);
    if (worker.missing.length > 0 || cp.missing.length > 0 || extraPct > 10) failed = true;
  };

  const everything = await plan({ allNodes: truth.components.map((c) => c.name) });
  const aws = await plan({ platform: 'AWS' });
  report('AWS, capability set vCurrent:', aws, truth.roles.awsDefault);
  const all = diskOf(everything, 'worker');
  const worker = diskOf(aws, 'worker');
  console.log(`  bytes per worker: ${mib(worker)} against ${mib(all)} for every image on every node: ${mib(all - worker)} saved (${((100 * (all - worker)) / all).toFixed(0)}%)`);

  const none = await plan({ platform: 'AWS', capabilitySet: 'None' });
  report('AWS, capability set None:', none, truth.roles.awsNone);
  const gated = none.images.filter((i) => truth.components.find((c) => c.pullSpec === i.pullSpec)?.capability !== undefined && !truth.roles.awsNone.controlPlane.includes(i.pullSpec));
  console.log(`  capability-gated images planned: ${gated.length}${gated.length ? ` (${gated.map((i) => i.name).join(', ')})` : ''}`);
  if (gated.length > 0) failed = true;

  const unknown = await plan({});
  console.log(`platform unknown, capability set vCurrent: worker set ${setImages(unknown, 'worker').size} images, ${mib(diskOf(unknown, 'worker'))}; ${unknown.warnings.find((w) => w.startsWith('platform unknown')) ?? 'no platform warning'}`);

  // The releases users upgrade to today: each era's truth per scenario (fixtures/eras.ts).
  for (const { truth: era } of eras) {
    const eraNames = new Map(era.components.map((c) => [c.pullSpec, c.name]));
    for (const scenario of SCENARIOS) {
      const want = era.scenarios[scenario.name];
      const options: Partial<PlanOptions> = {
        release: era.release.pullSpec,
        profile: scenario.profile,
        featureSet: scenario.featureSet,
        capabilitySet: scenario.capabilitySet,
      };
      const [any, onAws] = await Promise.all([plan(options), plan({ ...options, platform: 'AWS' })]);
      const planned = [...new Set(any.sets.flatMap((x) => x.images))].filter((p) => eraNames.has(p));
      const missing = want.applied.filter((p) => !planned.includes(p)).map((p) => eraNames.get(p)!);
      const extra = planned.filter((p) => !want.applied.includes(p)).map((p) => eraNames.get(p)!);
      const worker = setImages(onAws, 'worker');
      const cp = setImages(onAws, 'control-plane');
      const workerMissing = want.roles.worker.filter((p) => !worker.has(p));
      const cpMissing = want.roles.controlPlane.filter((p) => !cp.has(p));
      const workerExtra = [...worker].filter((p) => !want.roles.worker.includes(p));
      const extraPct = (100 * workerExtra.length) / Math.max(1, want.roles.worker.length);
      const saved = any.cluster.osStreams?.skipped.reduce((a, x) => a + x.diskBytes, 0) ?? 0;
      console.log(`${era.release.version} ${scenario.name}: applied ${planned.length}/${want.applied.length}${missing.length ? `, missing ${missing.join(', ')}` : ''}${extra.length ? `, extra ${extra.join(', ')}` : ''}; AWS worker ${worker.size} (truth ${want.roles.worker.length}: ${workerMissing.length} missing, ${workerExtra.length} extra, ${extraPct.toFixed(1)}%), control-plane ${cp.size} (truth ${want.roles.controlPlane.length}: ${cpMissing.length} missing); OS streams pinned ${any.cluster.osStreams?.pinned.join(', ') || 'none'}, ${mib(saved)} per node saved by the stream rule`);
      if (missing.length > 0 || extra.length > 0 || workerMissing.length > 0 || cpMissing.length > 0 || extraPct > 10) failed = true;
    }
  }

  // Live-cluster mode: a running 4.16.2 cluster on the test bed's API server, upgraded to 4.16.3.
  const cluster = await startCluster({ workers: 2 });
  try {
    const kube = new KubeClient(cluster.kubeConfig);
    await installOpenShiftCrds(kube, OPENSHIFT_4_21, 'config');
    const simulated = simulatedCluster(truth, cluster.nodes.map((n) => ({ name: n.name, role: n.role })));
    await loadSimulatedCluster(kube, simulated);
    const live = await plan({ capabilitySet: undefined, live: (await readLiveCluster(kube))! });
    const want = liveTruth(truth, simulated);
    const currentNames = new Map(truth.current.components.map((c) => [c.pullSpec, c.name]));
    console.log(`live cluster (${truth.current.version} on AWS, ${cluster.nodes.length} nodes, ${simulated.pods.length} pods) upgraded to ${truth.release.version}:`);
    for (const [role, wanted, running] of [['worker', want.worker, simulated.running.worker], ['control-plane', want.controlPlane, simulated.running.controlPlane]] as const) {
      const got = compare(setImages(live, role), wanted);
      const fallback = wanted.length - running.length;
      console.log(`  ${role} set: ${setImages(live, role).size} images, truth ${wanted.length} (${running.length} running now + ${fallback} new, not running, pause and OS images): ${got.missing.length} missing${got.missing.length ? ` (${got.missing.join(', ')})` : ''}, ${got.extra.length} extra${got.extra.length ? ` (${got.extra.join(', ')})` : ''}`);
      if (got.missing.length > 0 || got.extra.length > 0) failed = true;
    }
    const stale = [...setImages(live, 'worker'), ...setImages(live, 'control-plane')].filter((p) => currentNames.has(p) && !truth.components.some((c) => c.pullSpec === p));
    console.log(`  ${truth.current.version} digests pinned: ${stale.length}; skipped: ${live.skipped.length} images in no set`);
    if (stale.length > 0) failed = true;
    const liveWorker = diskOf(live, 'worker');
    console.log(`  bytes per worker: ${mib(liveWorker)} against ${mib(worker)} offline with --platform AWS and ${mib(all)} for every image on every node`);
  } finally {
    await cluster.stop();
  }
} finally {
  await registry.stop();
  await rm(storage, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;

function mib(bytes: number): string {
  return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
}
