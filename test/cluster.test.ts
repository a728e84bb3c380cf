/**
 * Proves the real-cluster test bed is real: a kube-apiserver that serves, stores, watches,
 * authorizes and admits; one CRI-O per node that answers CRI over gRPC, pulls through a
 * registry mirror, fills its fixed-size disk, and pins and unpins images on SIGHUP.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AuthenticationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  VersionApi,
  Watch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';
import { pushImage, type PushedImage } from './cluster/registry.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { withCri } from './support/agent-bed.js';

const REPOSITORY = 'openshift-release-dev/ocp-v4.0-art-dev';
const IMAGE_STORE_BYTES = 64 * 2 ** 20;

let registryDir: string;
let registry: RegistryHandle;
let small: PushedImage;
let cluster: TestCluster;

beforeAll(async () => {
  registryDir = await mkdtemp(join(tmpdir(), 'prestage-cluster-registry-'));
  registry = await startRegistry({ storageDir: join(registryDir, 'storage') });
  small = await pushImage(registry.host, REPOSITORY, 'small', { 'etc/prestage': 'pre-loaded by prestage\n' });
  cluster = await startCluster({
    workers: 2,
    registryMirrors: { 'quay.io': registry.host },
    insecureRegistries: [registry.host],
    imageStoreBytes: IMAGE_STORE_BYTES,
  });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
  await registry?.stop();
  if (registryDir) await rm(registryDir, { recursive: true, force: true });
});

const quayReference = (image: PushedImage) => `quay.io/${REPOSITORY}@${image.digest}`;
const nodeNamed = (name: string): TestNode => {
  const node = cluster.nodes.find((candidate) => candidate.name === name);
  if (!node) throw new Error(`no node ${name}`);
  return node;
};

describe('kube-apiserver', () => {
  it('serves /version as the kube-apiserver release that was built', async () => {
    const version = await cluster.kubeConfig.makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).toBe(cluster.binaries.versions['kube-apiserver']);
  });

  it('holds one control-plane node and the workers, with role labels and ephemeral storage', async () => {
    const nodes = (await cluster.kubeConfig.makeApiClient(CoreV1Api).listNode()).items;
    const summary = nodes.map((node) => ({
      name: node.metadata?.name,
      labels: Object.keys(node.metadata?.labels ?? {}).filter((label) => label.startsWith('node-role.kubernetes.io/')).sort(),
      allocatable: node.status?.allocatable?.['ephemeral-storage'],
      runtime: node.status?.nodeInfo?.containerRuntimeVersion,
    }));
    const workerLabels = ['node-role.kubernetes.io/worker'];
    const storage = String(IMAGE_STORE_BYTES);
    expect(summary).toEqual([
      { name: 'master-0', labels: ['node-role.kubernetes.io/control-plane', 'node-role.kubernetes.io/master'], allocatable: storage, runtime: 'cri-o://1.34.0' },
      { name: 'worker-0', labels: workerLabels, allocatable: storage, runtime: 'cri-o://1.34.0' },
      { name: 'worker-1', labels: workerLabels, allocatable: storage, runtime: 'cri-o://1.34.0' },
    ]);
  });

  it('creates, writes and watches a CRD with a status subresource', async () => {
    const group = 'testbed.prestage.io';
    const plural = 'probes';
    const extensions = cluster.kubeConfig.makeApiClient(ApiextensionsV1Api);
    await extensions.createCustomResourceDefinition({
      body: {
        metadata: { name: `${plural}.${group}` },
        spec: {
          group,
          scope: 'Cluster',
          names: { plural, singular: 'probe', kind: 'Probe', listKind: 'ProbeList' },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              subresources: { status: {} },
              schema: {
                openAPIV3Schema: {
                  type: 'object',
                  properties: {
                    spec: { type: 'object', properties: { message: { type: 'string' } } },
                    status: { type: 'object', properties: { observed: { type: 'string' } } },
                  },
                },
              },
            },
          ],
        },
      },
    });
    await waitFor('the CRD to be established', async () => {
      const crd = await extensions.readCustomResourceDefinition({ name: `${plural}.${group}` });
      return crd.status?.conditions?.some((condition) => condition.type === 'Established' && condition.status === 'True') ? true : undefined;
    });

    const objects = cluster.kubeConfig.makeApiClient(CustomObjectsApi);
    const address = { group, version: 'v1', plural };
    // The main resource ignores status: only the /status subresource may write it.
    const created = await objects.createClusterCustomObject({
      ...address,
      body: { apiVersion: `${group}/v1`, kind: 'Probe', metadata: { name: 'one' }, spec: { message: 'hello' }, status: { observed: 'ignored' } },
    });
    expect(created.status).toBeUndefined();

    const events: Array<{ type: string; observed: string | undefined }> = [];
    let sawModification!: () => void;
    let watchFailed!: (error: unknown) => void;
    const modified = new Promise<void>((resolve, reject) => {
      sawModification = resolve;
      watchFailed = reject;
    });
    const watch = await new Watch(cluster.kubeConfig).watch(
      `/apis/${group}/v1/${plural}`,
      { resourceVersion: created.metadata.resourceVersion },
      (type, object: { status?: { observed?: string } }) => {
        events.push({ type, observed: object.status?.observed });
        if (type === 'MODIFIED') sawModification();
      },
      (error: unknown) => watchFailed(error ?? new Error('watch ended')),
    );
    try {
      await objects.replaceClusterCustomObjectStatus({ ...address, name: 'one', body: { ...created, status: { observed: 'seen' } } });
      await modified;
    } finally {
      watch.abort();
    }

    expect(events).toEqual([{ type: 'MODIFIED', observed: 'seen' }]);
    const stored = await objects.getClusterCustomObject({ ...address, name: 'one' });
    expect(stored.status).toEqual({ observed: 'seen' });
  });

  it('authenticates a ServiceAccount token and RBAC denies it what it was not granted', async () => {
    const token = await cluster.serviceAccountToken('prestage-test', 'unprivileged');
    const asServiceAccount = cluster.kubeConfigForToken(token);

    const review = await asServiceAccount.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    expect(review.status?.userInfo?.username).toBe('system:serviceaccount:prestage-test:unprivileged');
    await expect(asServiceAccount.makeApiClient(CoreV1Api).listNode()).rejects.toMatchObject({ code: 403 });
  });

  it('enforces a ValidatingAdmissionPolicy', async () => {
    const admission = cluster.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    await admission.createValidatingAdmissionPolicy({
      body: {
        metadata: { name: 'no-forbidden-key' },
        spec: {
          matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['configmaps'] }] },
          validations: [{ expression: "!has(object.data) || !('forbidden' in object.data)", message: 'the forbidden key is forbidden' }],
        },
      },
    });
    await admission.createValidatingAdmissionPolicyBinding({
      body: { metadata: { name: 'no-forbidden-key' }, spec: { policyName: 'no-forbidden-key', validationActions: ['Deny'] } },
    });

    const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
    // The API server starts enforcing once its policy informer has seen both objects.
    const rejection = await waitFor('the policy to reject a ConfigMap', async () => {
      const name = `probe-${randomBytes(4).toString('hex')}`;
      try {
        await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name }, data: { forbidden: 'yes' } } });
      } catch (error) {
        return error as { code: number; body: string };
      }
      await core.deleteNamespacedConfigMap({ namespace: 'default', name });
      return undefined;
    }, 30_000, 500);
    expect(rejection.code).toBe(422);
    expect(rejection.body).toContain('the forbidden key is forbidden');
  });
});

describe('CRI-O on every node', () => {
  it('answers RuntimeService/Version over gRPC on its own unix socket', async () => {
    const versions = await Promise.all(cluster.nodes.map((node) => withCri(node, (cri) => cri.version())));
    expect(versions).toEqual(cluster.nodes.map(() => ({ runtimeName: 'cri-o', runtimeVersion: '1.34.0', runtimeApiVersion: 'v1' })));
    expect(new Set(cluster.nodes.map((node) => node.crio.socketPath)).size).toBe(cluster.nodes.length);
  });

  it('pulls a quay.io digest through the plain-http mirror into that node only', async () => {
    const worker = nodeNamed('worker-0');
    const imageRef = await withCri(worker, (cri) => cri.pullImage(quayReference(small)));

    const stored = await withCri(worker, (cri) => cri.imageStatus(quayReference(small)));
    expect(imageRef).toBe(quayReference(small));
    expect(stored).toMatchObject({ id: small.configDigest.slice('sha256:'.length), repoDigests: [quayReference(small)], pinned: false });
    expect(await withCri(nodeNamed('worker-1'), (cri) => cri.imageStatus(quayReference(small)))).toBeNull();
  });

  it('pulls by tag straight from an insecure registry', async () => {
    const byTag = `${registry.host}/${REPOSITORY}:small`;
    const image = await withCri(nodeNamed('worker-1'), async (cri) => {
      await cri.pullImage(byTag);
      return cri.imageStatus(byTag);
    });
    expect(image?.repoTags).toEqual([byTag]);
  });

  it('fails a pull that does not fit the node image store with ENOSPC', async () => {
    // Random bytes do not compress: the blob and its unpacked copy need twice this much.
    const big = await pushImage(registry.host, REPOSITORY, 'big', { 'var/filler': randomBytes(IMAGE_STORE_BYTES * 0.6) });
    const pull = withCri(nodeNamed('worker-1'), (cri) => cri.pullImage(quayReference(big)));
    await expect(pull).rejects.toThrow(/no space left on device/);
  });

  it('pins an image on SIGHUP after a pinned_images drop-in appears, and unpins when it goes', async () => {
    const master = nodeNamed('master-0');
    const reference = quayReference(small);
    await withCri(master, (cri) => cri.pullImage(reference));
    const pinned = async () => withCri(master, async (cri) => ({
      listed: (await cri.listImages()).find((image) => image.repoDigests.includes(reference))?.pinned,
      status: (await cri.imageStatus(reference))?.pinned,
    }));
    expect(await pinned()).toEqual({ listed: false, status: false });

    // As the MCO does: write beside the drop-in directory, then rename in (CRI-O reads every file).
    const dropIn = join(master.crio.confDir, '50-pinned-images');
    const staging = join(dirname(master.crio.confDir), '50-pinned-images.tmp');
    await writeFile(staging, `[crio.image]\npinned_images = [${JSON.stringify(reference)}]\n`);
    await rename(staging, dropIn);
    await master.crio.reload();
    expect(await pinned()).toEqual({ listed: true, status: true });

    await rm(dropIn);
    await master.crio.reload();
    expect(await pinned()).toEqual({ listed: false, status: false });
  });

  it('keeps its images across a clean restart and comes back after a kill', async () => {
    const worker = nodeNamed('worker-0');
    const before = worker.crio.pid;
    await worker.crio.restart();
    expect(worker.crio.pid).not.toBe(before);
    expect(await withCri(worker, (cri) => cri.imageStatus(quayReference(small)))).not.toBeNull();

    await worker.crio.kill();
    await expect(withCri(worker, (cri) => cri.version())).rejects.toThrow(/cannot reach/);
    await worker.crio.restart();
    expect((await withCri(worker, (cri) => cri.version())).runtimeName).toBe('cri-o');
  });
});

describe('teardown', () => {
  it('stop() leaves no process and no state behind', async () => {
    const { dir } = cluster;
    await cluster.stop();
    const survivors: string[] = [];
    for (const pid of await readdir('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      const commandLine = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      if (commandLine.includes(dir)) survivors.push(`${pid}: ${commandLine.replaceAll('\0', ' ')}`);
    }
    expect(survivors).toEqual([]);
    await expect(readdir(dir)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
