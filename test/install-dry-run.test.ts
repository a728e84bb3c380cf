/**
 * `install --apply --dry-run=client|server` against the test bed's real API server: every object
 * install writes (CRDs, Namespace, ServiceAccount, RBAC, admission policies and bindings,
 * DaemonSet, the cache's ConfigMap, Secret, PVC, Deployment and Service) is read before and after
 * each dry run, and none was created, changed (resourceVersion) or deleted.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, type KubeObject } from '../src/kube/client.js';
import { resourcePath, type Manifest } from '../src/install/apply.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { runCli as run } from './support/cli.js';
import { removeTempDirs, tempDirSync } from './support/temp-files.js';

const CACHE_IMAGE = `docker.io/library/registry@sha256:${'a'.repeat(64)}`;
let cluster: TestCluster;
let pullSecret: string;

beforeAll(async () => {
  cluster = await startCluster({ workers: 0 });
  pullSecret = join(tempDirSync('prestage-dry-run-'), 'pull-secret.json');
  writeFileSync(pullSecret, JSON.stringify({ auths: { 'quay.io': { auth: Buffer.from('robot:secret-pw').toString('base64') } } }));
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  removeTempDirs();
  await cluster?.stop();
});

/** The install flags of every run here: the agent, one pull slot, the cache with upstream credentials. */
function installArgs(image: string, ...more: string[]): string[] {
  return ['install', '--image', image, '--max-pulling-nodes', '1', '--pull-secret-name', 'team-pull', '--cache', '--cache-image', CACHE_IMAGE, '--cache-pull-secret', pullSecret, ...more];
}

/** Every object install writes, as it renders them (the ClusterIP is only needed to render). */
async function installedObjects(): Promise<Manifest[]> {
  const rendered = await run([...installArgs('registry.example/prestage:1.0.0'), '-o', 'json', '--cache-cluster-ip', '10.0.0.99']);
  expect(rendered.code, rendered.stderr).toBe(0);
  return (JSON.parse(rendered.stdout) as { items: Manifest[] }).items;
}

/** kind/name → resourceVersion, or 'absent'. */
async function snapshot(objects: readonly Manifest[]): Promise<Record<string, string>> {
  const client = new KubeClient(cluster.kubeConfig);
  const entries = await Promise.all(objects.map(async (object) => [`${object.kind}/${object.metadata.name}`, (await client.find<KubeObject>(resourcePath(object)))?.metadata.resourceVersion ?? 'absent'] as const));
  return Object.fromEntries(entries);
}

describe('install --apply --dry-run', () => {
  it('changes nothing on a cluster without prestage, in client and server mode', async () => {
    const objects = await installedObjects();
    expect(objects.map((object) => object.kind)).toEqual(expect.arrayContaining(['CustomResourceDefinition', 'Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'DaemonSet', 'ConfigMap', 'Secret', 'PersistentVolumeClaim', 'Deployment', 'Service']));
    const before = await snapshot(objects);
    expect(Object.values(before).every((version) => version === 'absent')).toBe(true);
    for (const mode of ['client', 'server']) {
      const result = await run([...installArgs('registry.example/prestage:1.0.0'), '--apply', `--dry-run=${mode}`, '--kubeconfig', cluster.kubeconfigPath]);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain(`daemonset/prestage-agent serverside-applied (${mode} dry run)`);
      expect(result.stdout).toContain(`customresourcedefinition/pinnedimagesets.prestage.dev serverside-applied (${mode} dry run)`);
      expect(result.stdout).not.toContain('secret-pw');
      expect(await snapshot(objects)).toEqual(before);
    }
  });

  it('changes nothing on an installed cluster: a new image, a server-refused storage class, --no-cache', async () => {
    const objects = await installedObjects();
    const installed = await run([...installArgs('registry.example/prestage:1.0.0'), '--apply', '--kubeconfig', cluster.kubeconfigPath]);
    expect(installed.code, installed.stderr).toBe(0);
    const before = await snapshot(objects);
    expect(Object.entries(before).filter(([, version]) => version === 'absent')).toEqual([]);

    for (const mode of ['client', 'server']) {
      const upgrade = await run([...installArgs('registry.example/prestage:2.0.0'), '--agent-arg=--reserve=8Gi', '--apply', `--dry-run=${mode}`, '--kubeconfig', cluster.kubeconfigPath]);
      expect(upgrade.code, upgrade.stderr).toBe(0);
      expect(upgrade.stdout).toContain(`daemonset/prestage-agent serverside-applied (${mode} dry run)`);
      expect(upgrade.stdout).toMatch(/^Dry run .*nothing changed\.$/m);
      expect(await snapshot(objects)).toEqual(before);

      const unwire = await run(['install', '--image', 'registry.example/prestage:1.0.0', '--no-cache', '--apply', `--dry-run=${mode}`, '--kubeconfig', cluster.kubeconfigPath]);
      expect(unwire.code, unwire.stderr).toBe(0);
      expect(unwire.stdout).toContain(`deployment/prestage-cache deleted (${mode} dry run)`);
      expect(await snapshot(objects)).toEqual(before);
    }

    // The server checks what it is sent: an invalid storage class name passes a client dry run and fails a server one.
    const client = await run([...installArgs('registry.example/prestage:1.0.0'), '--cache-storage-class', 'Not_A_Class', '--apply', '--dry-run=client', '--kubeconfig', cluster.kubeconfigPath]);
    expect(client.code, client.stderr).toBe(0);
    const server = await run([...installArgs('registry.example/prestage:1.0.0'), '--cache-storage-class', 'Not_A_Class', '--apply', '--dry-run=server', '--kubeconfig', cluster.kubeconfigPath]);
    expect(server.code).toBe(4);
    expect(server.stderr).toMatch(/^prestage: error: cannot apply PersistentVolumeClaim\/prestage-cache \(server dry run\): .*\n$/);
    expect(await snapshot(objects)).toEqual(before);
  });

  it('refuses --dry-run without --apply (rendering changes nothing anyway) with exit 2', async () => {
    const result = await run(['install', '--image', 'registry.example/prestage:1.0.0', '--dry-run=server']);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('prestage: error: --dry-run=server goes with --apply; without it install only prints and changes nothing\n');
  });
});
