import { describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import type { ProgressSnapshot } from './backend.js';
import type { ClusterVersion } from './live-cluster.js';
import { releaseVersionLabel } from '../api/set-metadata.js';
import { bytesFreedPerNode, checkReleaseReady, decidePrune, resolveUpdate, ReleaseNotReadyError, riskLines, type ReleaseSet } from './release-lifecycle.js';

const image = (v: string) => `quay.io/openshift-release-dev/ocp-release@sha256:${v.replace(/\D/g, '').padEnd(64, '0')}`;

/** As the CVO writes it: recommended updates in availableUpdates, the others only in conditionalUpdates. */
const clusterVersion: ClusterVersion = {
  metadata: { name: 'version' },
  spec: { channel: 'stable-4.16' },
  status: {
    history: [{ state: 'Completed', version: '4.16.2', image: image('4.16.2') }],
    availableUpdates: [{ version: '4.16.4', image: image('4.16.4') }, { version: '4.16.3', image: image('4.16.3') }],
    conditionalUpdates: [
      { release: { version: '4.16.3', image: image('4.16.3') }, risks: [], conditions: [{ type: 'Recommended', status: 'True' }] },
      {
        release: { version: '4.16.5', image: image('4.16.5') },
        risks: [{ name: 'AzureDiskHang', message: 'Disks may hang\n  on Azure.', url: 'https://issues.redhat.com/browse/OCPBUGS-1' }],
        conditions: [{ type: 'Recommended', status: 'False', reason: 'AzureDiskHang' }],
      },
    ],
  },
};

describe('resolveUpdate (--to), as oc adm upgrade --to reads ClusterVersion', () => {
  it('gives the pullspec of a recommended update, with no risks', () => {
    expect(resolveUpdate(clusterVersion, '4.16.3', false)).toEqual({ version: '4.16.3', pullSpec: image('4.16.3'), risks: [] });
  });

  it('refuses a conditional update, naming its risks and the flag; accepts it with --allow-not-recommended', () => {
    expect(() => resolveUpdate(clusterVersion, '4.16.5', false)).toThrow(
      new BadInputError('--to 4.16.5: a conditional update, not recommended for this cluster (AzureDiskHang); risks: AzureDiskHang: Disks may hang on Azure. (https://issues.redhat.com/browse/OCPBUGS-1); pass --allow-not-recommended to accept them'),
    );
    const accepted = resolveUpdate(clusterVersion, '4.16.5', true);
    expect(accepted.pullSpec).toBe(image('4.16.5'));
    expect(riskLines(accepted)).toEqual(['4.16.5 is not recommended: AzureDiskHang: Disks may hang on Azure. (https://issues.redhat.com/browse/OCPBUGS-1)']);
  });

  it('refuses a version not offered, listing what is offered in version order', () => {
    expect(() => resolveUpdate(clusterVersion, '4.17.0', true)).toThrow(
      '--to 4.17.0: not an update this cluster offers; it offers 4.16.3, 4.16.4, 4.16.5 (not recommended) in channel stable-4.16',
    );
    expect(() => resolveUpdate({ metadata: { name: 'version' }, status: { availableUpdates: null } }, '4.16.3', false)).toThrow('it offers none (');
  });
});

describe('releaseVersionLabel', () => {
  it('keeps OpenShift versions as they are and makes anything else a valid label value', () => {
    expect(releaseVersionLabel('4.16.3')).toBe('4.16.3');
    expect(releaseVersionLabel('4.17.0-rc.1')).toBe('4.17.0-rc.1');
    expect(releaseVersionLabel('4.17.0+build.5')).toBe('4.17.0_build.5');
    const long = releaseVersionLabel(`4.16.3-${'x'.repeat(70)}.`);
    expect(long).toHaveLength(63);
    expect(long).toMatch(/^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/);
  });
});

describe('decidePrune', () => {
  const sets: ReleaseSet[] = [
    { name: 'prestage-4.15.9-worker', version: '4.15.9' },
    { name: 'prestage-4.16.0-rc.1-worker', version: '4.16.0-rc.1' },
    { name: 'prestage-4.16.2-worker', version: '4.16.2' },
    { name: 'prestage-4.16.3-worker', version: '4.16.3' },
    { name: 'prestage-4.16.10-worker', version: '4.16.10' },
    { name: 'hand-made', version: 'latest' },
    { name: 'no-version' },
  ];
  const running = (history: NonNullable<ClusterVersion['status']>['history']): ClusterVersion => ({ metadata: { name: 'version' }, status: { history } });

  it('prunes releases older than the Completed current one (semver: 4.16.10 > 4.16.3, rc before GA); keeps current, newer and unversioned sets', () => {
    const decision = decidePrune(running([{ state: 'Completed', version: '4.16.3' }, { state: 'Completed', version: '4.16.2' }]), sets);
    expect('prune' in decision && decision.prune.map((s) => s.name)).toEqual(['prestage-4.15.9-worker', 'prestage-4.16.0-rc.1-worker', 'prestage-4.16.2-worker']);
    expect('keep' in decision && decision.keep.map((s) => s.name)).toEqual(['prestage-4.16.3-worker', 'prestage-4.16.10-worker', 'hand-made', 'no-version']);
  });

  it("prunes an operator's set once its operator runs the newest bundle it holds, and says why", () => {
    const operatorSets: ReleaseSet[] = [
      { name: 'prestage-4.16.3-op-datagrid-worker', version: '4.16.3', operator: { package: 'datagrid', head: 'datagrid-operator.v2.4.2' } },
      { name: 'prestage-4.16.3-op-kv-store-worker', version: '4.16.3', operator: { package: 'kv-store', head: 'kv-store.v1.1.0' } },
      { name: 'prestage-4.16.2-op-kv-store-worker', version: '4.16.2', operator: { package: 'kv-store', head: 'kv-store.v1.0.0' } },
    ];
    const installed = new Map([['datagrid', ['datagrid-operator.v2.4.2', 'datagrid-operator.v2.4.2']], ['kv-store', ['kv-store.v1.0.0']]]);
    const decision = decidePrune(running([{ state: 'Completed', version: '4.16.3' }]), operatorSets, installed);
    if (!('prune' in decision)) throw new Error('waiting');
    expect(decision.prune.map((s) => s.name)).toEqual(['prestage-4.16.3-op-datagrid-worker', 'prestage-4.16.2-op-kv-store-worker']);
    expect(decision.keep.map((s) => s.name)).toEqual(['prestage-4.16.3-op-kv-store-worker']);
    expect(decision.why.get('prestage-4.16.3-op-datagrid-worker')).toBe('operator datagrid runs datagrid-operator.v2.4.2, the newest bundle the set holds, wherever it is installed');
    expect(decision.why.get('prestage-4.16.2-op-kv-store-worker')).toBe('release 4.16.2 is older than 4.16.3');
    // One install still on its way (another Subscription of the package): the set stays.
    const halfway = decidePrune(running([{ state: 'Completed', version: '4.16.3' }]), operatorSets, new Map([['datagrid', ['datagrid-operator.v2.4.2', 'datagrid-operator.v2.3.3']]]));
    expect('keep' in halfway && halfway.keep.map((s) => s.name)).toContain('prestage-4.16.3-op-datagrid-worker');
  });

  it('prunes nothing while the newest history entry is Partial (an update in progress)', () => {
    expect(decidePrune(running([{ state: 'Partial', version: '4.16.3' }, { state: 'Completed', version: '4.16.2' }]), sets)).toEqual({
      waiting: 'the update to 4.16.3 is not Completed (history state Partial); prune once it is',
    });
  });
});

describe('bytesFreedPerNode', () => {
  it('sums the disk bytes of the sets to prune on each node they target', () => {
    const snapshot: ProgressSnapshot = {
      sets: [
        { name: 'a-control-plane', exists: true, generation: 1, nodes: [{ node: 'master-0', set: 'a-control-plane', phase: 'done', desiredGeneration: 1, currentGeneration: 1 }] },
        { name: 'a-worker', exists: true, generation: 1, nodes: ['worker-1', 'worker-0'].map((node) => ({ node, set: 'a-worker', phase: 'done' as const, desiredGeneration: 1, currentGeneration: 1 })) },
      ],
    };
    expect([...bytesFreedPerNode([{ name: 'a-control-plane', diskBytes: 300 }, { name: 'a-worker', diskBytes: 200 }], snapshot)]).toEqual([['master-0', 300], ['worker-0', 200], ['worker-1', 200]]);
  });
});

describe('checkReleaseReady', () => {
  const node = (name: string, phase: 'done' | 'progressing', extra = {}) => ({ node: name, set: 's', phase, desiredGeneration: 1, currentGeneration: phase === 'done' ? 1 : 0, ...extra });
  it('READY only when every set is done on every node it targets; else NOT READY naming each node missing', () => {
    expect(checkReleaseReady('4.16.3', { sets: [{ name: 's', exists: true, generation: 1, nodes: [node('a', 'done'), node('b', 'done')] }] })).toBe('READY 4.16.3: 1 set current on all 2 nodes it targets');
    const notReady = { sets: [{ name: 's', exists: true, generation: 1, nodes: [node('a', 'done'), node('b', 'progressing', { imagesTotal: 10, imagesDone: 3 })] }, { name: 't', exists: true, generation: 1, nodes: [] }] };
    expect(() => checkReleaseReady('4.16.3', notReady)).toThrow(new ReleaseNotReadyError('NOT READY 4.16.3: s on b progressing (3/10 images), t targets no node'));
    expect(() => checkReleaseReady('4.16.3', { sets: [] })).toThrow(/no prestage set of release 4\.16\.3/);
  });
});
