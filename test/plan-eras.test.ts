/**
 * `prestage plan` of the releases users upgrade to today, end to end: a 4.20-style and a
 * 5.0-style release (fixtures/eras.ts: feature-gate annotations, the payload's FeatureGate
 * manifests, gate-dependent capabilities, two node OS streams, the MCO daemon's image named only
 * as `machineConfigOperator`) served by the real registry, planned as a user would for each
 * scenario (Default, TechPreviewNoUpgrade, capability set None, the HyperShift profile), and
 * judged by the fixture's truth tables, never by the planner's own rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEraFixture, ERAS, SCENARIOS, type Era, type EraFixture, type Scenario } from '../fixtures/eras.js';
import { pushFixture } from '../fixtures/push.js';
import type { Plan } from '../src/plan/types.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { runCli } from './support/cli.js';

const fixtures = new Map<Era, EraFixture>(ERAS.map((era) => [era, buildEraFixture(era)]));
let registry: RegistryHandle;
let mirror: string[];

beforeAll(async () => {
  registry = await startRegistry();
  for (const fixture of fixtures.values()) await pushFixture(registry.url, fixture);
  mirror = ['--mirror', `quay.io=${registry.host}`, '--insecure-registry', registry.host];
}, 300_000);
afterAll(async () => {
  await registry?.stop();
});

const scenarioFlags = (s: Scenario): string[] => [
  ...(s.profile !== 'self-managed-high-availability' ? ['--profile', s.profile] : []),
  ...(s.featureSet !== 'Default' ? ['--feature-set', s.featureSet] : []),
  ...(s.capabilitySet !== 'vCurrent' ? ['--capability-set', s.capabilitySet] : []),
];

async function plan(era: Era, args: string[]): Promise<Plan> {
  const r = await runCli(['plan', fixtures.get(era)!.truth.release.pullSpec, ...mirror, '-o', 'json', ...args]);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as Plan;
}
const inSets = (p: Plan) => new Set(p.sets.flatMap((s) => s.images));
const roleSet = (p: Plan, role: 'worker' | 'control-plane') => new Set(p.sets.filter((s) => s.role === role).flatMap((s) => s.images));

describe.each(ERAS)('plan of the %s-style release', (era) => {
  const { truth } = fixtures.get(era)!;
  const nameOf = new Map(truth.components.map((c) => [c.pullSpec, c.name]));
  const names = (pullSpecs: Iterable<string>) => [...pullSpecs].map((p) => nameOf.get(p) ?? p).sort();

  describe.each(SCENARIOS.map((s) => [s.name, s] as const))('%s', (name, scenario) => {
    const want = truth.scenarios[name];
    let unknownPlatform: Plan;
    let aws: Plan;
    beforeAll(async () => {
      [unknownPlatform, aws] = await Promise.all([plan(era, scenarioFlags(scenario)), plan(era, [...scenarioFlags(scenario), '--platform', 'AWS'])]);
    }, 120_000);

    it('pins exactly the images the CVO applies (and the nodes boot), the rest in no set', () => {
      const planned = [...inSets(unknownPlatform)].filter((p) => nameOf.has(p));
      expect(names(planned)).toEqual(names(want.applied));
      expect(unknownPlatform.images.filter((i) => i.source === 'component').length + unknownPlatform.skipped.length).toBe(truth.components.length);
    });

    it('on AWS: no image missing from either role, at most 10 % extra on workers', () => {
      const worker = roleSet(aws, 'worker');
      const controlPlane = roleSet(aws, 'control-plane');
      expect(names(want.roles.worker.filter((p) => !worker.has(p)))).toEqual([]);
      expect(names(want.roles.controlPlane.filter((p) => !controlPlane.has(p)))).toEqual([]);
      const extra = [...worker].filter((p) => !want.roles.worker.includes(p));
      expect(extra.length / want.roles.worker.length).toBeLessThanOrEqual(0.1);
    });

    it('decides inclusion with the gates and capabilities of this release and scenario', () => {
      expect(unknownPlatform.cluster.featureSet).toBe(scenario.featureSet);
      expect(unknownPlatform.cluster.capabilities).toEqual([...want.enabledCapabilities].sort());
      if (truth.cvoReadsGates) expect(unknownPlatform.cluster.featureGates!.enabled).toEqual([...want.enabledGates].sort());
      else expect(unknownPlatform.cluster.featureGates).toBeUndefined();
    });

    it('pins the OS stream(s) the nodes boot, and says what the others would cost', () => {
      const os = unknownPlatform.cluster.osStreams!;
      expect(os.pinned).toEqual([...want.osStreams.pinned].sort());
      for (const skipped of os.skipped) expect(skipped.diskBytes).toBe(want.osStreams.bytesPerNode[skipped.stream]);
      expect(os.skipped.map((s) => s.stream).sort()).toEqual(Object.keys(want.osStreams.streams).filter((s) => !want.osStreams.pinned.includes(s)).sort());
    });
  });

  it('adds a stream with --os-stream, and refuses one the release lacks (exit 2, one line listing its streams)', async () => {
    const withBoth = await plan(era, ['--os-stream', 'rhel-10']);
    expect(withBoth.cluster.osStreams!.pinned).toEqual(['rhel-10', 'rhel-9']);
    const rhel10 = truth.components.filter((c) => c.osStream === 'rhel-10').map((c) => c.pullSpec);
    expect(rhel10.length).toBe(2);
    for (const p of rhel10) expect(roleSet(withBoth, 'worker').has(p)).toBe(true);
    const r = await runCli(['plan', truth.release.pullSpec, ...mirror, '--os-stream', 'rhel-11']);
    expect(r).toEqual({ code: 2, stdout: '', stderr: 'prestage: error: --os-stream rhel-11 is not a node OS stream of this release; it carries rhel-10, rhel-9\n' });
  });

  it('plans the MCO image on workers: its daemon runs on every node', async () => {
    const p = await plan(era, []);
    const mco = p.images.find((i) => i.name === 'machine-config-operator')!;
    expect(mco.role).toBe('all');
    expect(mco.evidence.join('; ')).toMatch(/images\.json key machineConfigOperator .*machine-config-daemon DaemonSet on every node/);
  });
});

describe('5.0-style release: gates, gated capabilities and bad input', () => {
  const { truth } = fixtures.get('5.0')!;
  const capi = truth.components.filter((c) => c.featureGate === 'ClusterAPIMachineManagement').map((c) => c.pullSpec);

  it('--capabilities ClusterAPI with its gate off plans none of the Cluster API images, and says why', async () => {
    const p = await plan('5.0', ['--capability-set', 'None', '--capabilities', 'ClusterAPI']);
    expect(p.warnings.join('\n')).toMatch(/^--capabilities ClusterAPI: the CVO of 5\.0\.2 drops it while none of its feature gates \(ClusterAPIMachineManagement\) is enabled/m);
    expect(capi.length).toBeGreaterThanOrEqual(9);
    for (const image of capi) expect(inSets(p).has(image)).toBe(false);
    const why = p.skipped.find((s) => s.pullSpec === capi[0])!.why;
    expect(why).toMatch(/\[feature-gate\] feature gate ClusterAPIMachineManagement is not enabled/);
  });

  it('--feature-gates turns the gate on (CustomNoUpgrade): the Cluster API images are planned', async () => {
    const p = await plan('5.0', ['--feature-gates', 'ClusterAPIMachineManagement']);
    expect(p.cluster.featureSet).toBe('CustomNoUpgrade');
    for (const image of capi) expect(inSets(p).has(image)).toBe(true);
  });

  it.each([
    [['--feature-gates', 'ClusterAPIMachineManagment'], /^prestage: error: --feature-gates ClusterAPIMachineManagment: ClusterAPIMachineManagment is not a feature gate of this release; it knows .*ClusterAPIMachineManagement, /],
    [['--capabilities', 'ClusterAPIs'], /^prestage: error: --capabilities ClusterAPIs is not a capability of 5\.0\.2; use one of .*ClusterAPI$/m],
    [['--capability-set', 'v4.19'], /^prestage: error: --capability-set v4\.19 is not a capability set of 5\.0\.2; use one of None, v4\.11, .*, v4\.18, vCurrent$/m],
    [['--feature-set', 'TechPreview'], /^prestage: error: --feature-set TechPreview is not a feature set of this release; use one of Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade, OKD$/m],
  ])('refuses %j with exit 2 and one line', async (args, message) => {
    const r = await runCli(['plan', truth.release.pullSpec, ...mirror, ...args]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(message);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
