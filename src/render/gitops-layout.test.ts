import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { afterEach, describe, expect, it } from 'vitest';
import type { Plan } from '../plan/types.js';
import { writeGitOpsDir } from './pinned-image-sets.js';
import type { GitOpsOptions } from './gitops-layout.js';

const IMAGE = `quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:${'a'.repeat(64)}`;
const plan = {
  release: { version: '4.16.3', pullSpec: 'quay.io/openshift-release-dev/ocp-release:4.16.3-x86_64', digest: `sha256:${'b'.repeat(64)}` },
  sets: (['control-plane', 'worker'] as const).map((role) => ({
    name: `prestage-4.16.3-${role}`,
    role,
    labels: { 'machineconfiguration.openshift.io/role': role === 'worker' ? 'worker' : 'master' },
    images: [IMAGE],
    compressedBytes: 10,
    diskBytes: 20,
    estimate: { method: 'isize' },
  })),
} as unknown as Plan;

const options = (tool: GitOpsOptions['tool']): GitOpsOptions => ({ tool, gateImage: 'quay.example.com/prestage/prestage:1.0', upgradeTo: '4.16.3', namespace: 'prestage-gate', fluxPath: './clusters/prod/prestage', fluxSource: 'flux-system' });
/** The fields of the written objects these tests read. */
interface GitOpsObject {
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly annotations?: Readonly<Record<string, string>> };
  readonly spec: {
    readonly template: { readonly spec: { readonly containers: ReadonlyArray<{ readonly image: string; readonly args: readonly string[] }> } };
    readonly path: string;
    readonly dependsOn?: ReadonlyArray<{ readonly name: string }>;
    readonly healthChecks?: readonly unknown[];
  };
  readonly rules: ReadonlyArray<{ readonly verbs: readonly string[] }>;
  readonly resources?: readonly string[];
}

let dir: string | undefined;
afterEach(async () => dir && rm(dir, { recursive: true, force: true }));

async function written(tool: GitOpsOptions['tool'], api: 'mco' | 'prestage'): Promise<{ files: string[]; read: (file: string) => Promise<Array<GitOpsObject>> }> {
  dir = await mkdtemp(join(tmpdir(), 'prestage-gitops-'));
  const files = await writeGitOpsDir(plan, dir, api, new Map(), options(tool));
  return { files, read: async (file) => yaml.loadAll(await readFile(join(dir!, file), 'utf8')) as Array<GitOpsObject> };
}

const wave = (object: GitOpsObject) => object.metadata.annotations?.['argocd.argoproj.io/sync-wave'];

describe('--gitops argocd', () => {
  it('orders access, sets, the gate hook Job and the upgrade in sync waves, all in the kustomization', async () => {
    const { files, read } = await written('argocd', 'mco');
    expect(files).toEqual(['prestage-gate-access.yaml', 'prestage-4.16.3-control-plane.yaml', 'prestage-4.16.3-worker.yaml', 'prestage-gate.yaml', 'upgrade.yaml', 'kustomization.yaml']);
    expect((await read('prestage-gate-access.yaml')).map((object) => [object.kind, wave(object)])).toEqual([['Namespace', '-1'], ['ServiceAccount', '-1'], ['ClusterRole', '-1'], ['ClusterRoleBinding', '-1']]);
    expect(wave((await read('prestage-4.16.3-worker.yaml'))[0]!)).toBe('0');
    const [job] = await read('prestage-gate.yaml');
    expect(job!.metadata).toMatchObject({ name: 'prestage-gate-4.16.3', annotations: { 'argocd.argoproj.io/hook': 'Sync', 'argocd.argoproj.io/sync-wave': '1' } });
    expect(job!.spec.template.spec.containers[0]).toMatchObject({ image: 'quay.example.com/prestage/prestage:1.0', args: ['wait', 'prestage-4.16.3-control-plane', 'prestage-4.16.3-worker', '--backend', 'mco', '--timeout', '24h', '-o', 'json'] });
    const [upgrade] = await read('upgrade.yaml');
    expect(upgrade).toEqual({ apiVersion: 'config.openshift.io/v1', kind: 'ClusterVersion', metadata: { name: 'version', annotations: { 'argocd.argoproj.io/sync-wave': '2', 'argocd.argoproj.io/sync-options': 'ServerSideApply=true' } }, spec: { desiredUpdate: { version: '4.16.3' } } });
    expect((await read('kustomization.yaml'))[0]!.resources).toEqual(files.filter((file) => file !== 'kustomization.yaml'));
  });

  it("grants the gate only reads of what wait reads for the sets' API", async () => {
    const { read } = await written('argocd', 'mco');
    const role = (await read('prestage-gate-access.yaml')).find((object) => object.kind === 'ClusterRole')!;
    const verbs = new Set(role.rules.flatMap((rule) => rule.verbs));
    expect([...verbs].sort()).toEqual(['get', 'list', 'watch']);
    expect(role.rules[0]).toEqual({ apiGroups: ['machineconfiguration.openshift.io'], resources: ['pinnedimagesets', 'machineconfignodes', 'machineconfigpools'], verbs: ['get', 'list', 'watch'] });
  });
});

describe('--gitops flux', () => {
  it('writes a directory per step and Kustomizations chained by dependsOn, health-checking the sets and the gate Job', async () => {
    const { files, read } = await written('flux', 'prestage');
    expect(files.sort()).toEqual(['flux-kustomizations.yaml', 'gate/access.yaml', 'gate/job.yaml', 'gate/kustomization.yaml', 'sets/kustomization.yaml', 'sets/prestage-4.16.3-control-plane.yaml', 'sets/prestage-4.16.3-worker.yaml', 'upgrade/clusterversion.yaml', 'upgrade/kustomization.yaml']);
    const kustomizations = await read('flux-kustomizations.yaml');
    expect(kustomizations.map((object) => [object.metadata.name, object.spec.path, object.spec.dependsOn?.[0]?.name])).toEqual([
      ['prestage-sets', './clusters/prod/prestage/sets', undefined],
      ['prestage-gate', './clusters/prod/prestage/gate', 'prestage-sets'],
      ['prestage-upgrade', './clusters/prod/prestage/upgrade', 'prestage-gate'],
    ]);
    expect(kustomizations[0]!.spec.healthChecks).toEqual([
      { apiVersion: 'prestage.dev/v1alpha1', kind: 'PinnedImageSet', name: 'prestage-4.16.3-control-plane' },
      { apiVersion: 'prestage.dev/v1alpha1', kind: 'PinnedImageSet', name: 'prestage-4.16.3-worker' },
    ]);
    expect(kustomizations[1]!.spec.healthChecks).toEqual([{ apiVersion: 'batch/v1', kind: 'Job', name: 'prestage-gate-4.16.3', namespace: 'prestage-gate' }]);
    const [job] = await read('gate/job.yaml');
    expect(job!.spec.template.spec.containers[0]!.args).toContain('agent');
    expect((await read('sets/prestage-4.16.3-worker.yaml'))[0]!.metadata.annotations?.['argocd.argoproj.io/sync-wave']).toBeUndefined();
  });
});
