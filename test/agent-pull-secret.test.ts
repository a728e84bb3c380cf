/**
 * The node's pull secret, end to end on the real test bed: the real agent process reads a
 * kubelet-format config.json and passes the credentials in CRI PullImage's auth; a real CRI-O
 * pulls from a registry that requires them (distribution with token auth, as Quay does).
 *
 * What a kubelet passes is the config.json entry matching the IMAGE'S NAME. CRI-O 1.34
 * (containers/image 5.35, docker_image_src.go) sends those credentials only to that registry,
 * never to a mirror on another host: a mirror's credentials come from CRI-O's own auth file
 * (`global_auth_file`, which OpenShift points at /var/lib/kubelet/config.json). So the agent's
 * credentials are tested on images named after the authenticating registry itself, and the
 * mirror case shows what a node needs for it.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS, VERSION, isSetDone, type NodePinnedImages, type PinnedImageSet, type PinnedImageSetStatus } from '../src/api/prestage.js';
import { renderPinDropIn } from '../src/agent/crio.js';
import { CriClient } from '../src/cri/client.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster, type TestNode } from './cluster/index.js';
import { startRegistry, type RegistryHandle } from './harness/index.js';
import { prestageEntry } from './support/prestage-process.js';
import { installPrestageCrds } from './support/agent-bed.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const DROP_IN = '99-prestage-pinned-images';
const UNAUTHORIZED = /unauthorized|authentication required|invalid username\/password/i;

const truth = inject('fixtureTruth');
const BY_SIZE = [...truth.components].sort((a, b) => a.layers.reduce((sum, l) => sum + l.size, 0) - b.layers.reduce((sum, l) => sum + l.size, 0));
/** Digests of small images, one per scenario. */
const [DIRECT, MIRRORED, BY_SECRET] = BY_SIZE.slice(1, 4).map((component) => component.digest) as [string, string, string];
/** The agent's namespace, where the Secrets sets name live. */
const AGENT_NAMESPACE = 'prestage-agent-test';

let registry: RegistryHandle;
let cluster: TestCluster;
let objects: CustomObjectsApi;
let worker: TestNode;
/** CRI-O's own auth file: absent until the mirror test writes it. */
let crioAuthFile: string;
/** Everything the agent printed in every run, for the no-secrets check. */
const outputs: string[] = [];

beforeAll(async () => {
  registry = await startRegistry({ storageDir: inject('fixtureStorageDir'), auth: 'token' });
  crioAuthFile = join(tmpdir(), `prestage-crio-auth-${process.pid}-${Date.now()}.json`);
  // quay.io is mirrored to the authenticating registry; the registry is also reachable under its own name.
  cluster = await startCluster({ workers: 1, registryMirrors: { 'quay.io': registry.host }, insecureRegistries: [registry.host], crioAuthFile });
  objects = await installPrestageCrds(cluster);
  await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: AGENT_NAMESPACE } } });
  worker = cluster.nodes.find((node) => node.name === 'worker-0')!;
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  await cluster?.stop();
  await registry?.stop();
  if (crioAuthFile) await rm(crioAuthFile, { force: true });
});

const setAddress = { group: GROUP, version: VERSION, plural: PINNED_IMAGE_SETS };
function createSet(name: string, images: readonly string[], pullSecrets?: readonly string[]) {
  const body: PinnedImageSet = {
    apiVersion: API_VERSION,
    kind: 'PinnedImageSet',
    metadata: { name },
    spec: { pinnedImages: images.map((image) => ({ name: image })), nodeSelector: { matchLabels: { 'kubernetes.io/hostname': worker.name } }, ...(pullSecrets ? { pullSecrets: pullSecrets.map((secret) => ({ name: secret })) } : {}) },
  };
  return objects.createClusterCustomObject({ ...setAddress, body });
}

async function nodeStatusJson(): Promise<string> {
  return JSON.stringify(await objects.getClusterCustomObject({ group: GROUP, version: VERSION, plural: NODE_PINNED_IMAGES, name: worker.name }));
}

async function setStatus(name: string): Promise<PinnedImageSetStatus | undefined> {
  return (JSON.parse(await nodeStatusJson()) as NodePinnedImages).status?.pinnedImageSets?.find((set) => set.name === name);
}

async function criPinned(image: string): Promise<boolean | 'absent'> {
  const cri = await CriClient.connect(worker.crio.socketPath);
  try {
    return (await cri.listImages()).find((entry) => entry.repoDigests.includes(image))?.pinned ?? 'absent';
  } finally {
    cri.close();
  }
}

/** A kubelet-format config.json (`/var/lib/kubelet/config.json`). */
async function kubeletConfig(name: string, auths: Record<string, { username: string; password: string }>): Promise<string> {
  const path = join(cluster.dir, name);
  const entries = Object.fromEntries(Object.entries(auths).map(([key, { username, password }]) => [key, { auth: Buffer.from(`${username}:${password}`).toString('base64') }]));
  await writeFile(path, JSON.stringify({ auths: entries }));
  return path;
}

/** `prestage agent --once` as its own process; exit code and everything it printed. */
function agentOnce(pullSecret: string): Promise<{ code: number; output: string }> {
  const args = [
    'agent', '--once', '--log-level', 'debug',
    '--node-name', worker.name,
    '--kubeconfig', cluster.kubeconfigPath,
    '--cri-socket', worker.crio.socketPath,
    '--drop-in', join(worker.crio.confDir, DROP_IN),
    '--reload', `pid:${worker.crio.pid}`,
    '--pull-secret', pullSecret,
    '--reserve', '0',
    '--namespace', AGENT_NAMESPACE,
  ];
  return new Promise((resolve) => {
    execFile(process.execPath, [...prestageEntry().nodeArgs, ...args], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const output = stdout + stderr;
      outputs.push(output);
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output });
    });
  });
}

const secrets = () => [registry.password!, Buffer.from(`${registry.username}:${registry.password}`).toString('base64')];

describe('pull secret: images named after the registry that requires it', () => {
  const image = () => `${registry.host}/${truth.componentRepository}@${DIRECT}`;

  it.each([
    { without: 'a pull secret', auths: () => ({}), sentCredentials: false },
    { without: 'the right password', auths: () => ({ [registry.host]: { username: registry.username!, password: 'wrong-password' } }), sentCredentials: true },
  ])('fails the set with an unauthorized error without $without', async ({ auths, sentCredentials }) => {
    await createSet('direct', [image()]).catch((error: { code?: number }) => {
      if (error.code !== 409) throw error;
    });
    const issued = registry.tokenIssuer!.log.length;
    const run = await agentOnce(await kubeletConfig('config-bad.json', auths()));
    expect(run.code, run.output).toBe(1);
    const set = await setStatus('direct');
    expect(set?.lastFailedGeneration).toBe(1);
    expect(set?.images[0]).toMatchObject({ name: image(), state: 'Failed', attempts: 1 });
    expect(set?.images[0]?.lastError).toMatch(UNAUTHORIZED);
    expect(await criPinned(image())).toBe('absent');
    // What reached the registry's token realm: no credentials, or credentials that did not hold.
    const requests = registry.tokenIssuer!.log.slice(issued);
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((request) => request.hadAuthorization === sentCredentials && !request.authenticated)).toBe(true);
  });

  it('pulls and pins with the right pull secret, passed through CRI to CRI-O', async () => {
    const issued = registry.tokenIssuer!.log.length;
    // The key a kubelet would match for this image: its registry host.
    const run = await agentOnce(await kubeletConfig('config.json', { [registry.host]: { username: registry.username!, password: registry.password! } }));
    expect(run.code, run.output).toBe(0);
    const set = await setStatus('direct');
    expect(set && isSetDone(set)).toBe(true);
    expect(set?.images[0]).toMatchObject({ name: image(), state: 'Pinned', attempts: 1 });
    expect(await criPinned(image())).toBe(true);
    expect(await readFile(join(worker.crio.confDir, DROP_IN), 'utf8')).toBe(renderPinDropIn([image()]));
    // CRI-O authenticated at the token realm with them and was granted the pull.
    expect(registry.tokenIssuer!.log.slice(issued)).toContainEqual(expect.objectContaining({
      authenticated: true,
      granted: [{ type: 'repository', name: truth.componentRepository, actions: ['pull'] }],
    }));
  });
});

describe('pull secret: a Secret the set names in spec.pullSecrets', () => {
  const image = () => `${registry.host}/${truth.componentRepository}@${BY_SECRET}`;

  it('fails the set, pulling nothing, while the Secret is missing; pulls and pins with its credentials once it is there', async () => {
    // CRI-O's own auth file holds nothing yet (the mirror tests below write it): only the CRI auth can authenticate.
    expect(existsSync(crioAuthFile)).toBe(false);
    const noNodeSecret = await kubeletConfig('config-empty.json', {});
    await createSet('by-secret', [image()], ['team-pull']);
    const missing = await agentOnce(noNodeSecret);
    expect(missing.code, missing.output).toBe(1);
    const failed = await setStatus('by-secret');
    expect(failed?.lastFailedGenerationError).toBe(`pull secret ${AGENT_NAMESPACE}/team-pull not found: create it (type kubernetes.io/dockerconfigjson) in namespace ${AGENT_NAMESPACE}`);
    expect(failed?.images[0]).toMatchObject({ name: image(), state: 'Pending', attempts: 0 });
    expect(await criPinned(image())).toBe('absent');

    // As `kubectl create secret docker-registry team-pull --docker-server=<registry> ...` makes it.
    const dockerConfig = { auths: { [registry.host]: { username: registry.username!, password: registry.password!, auth: Buffer.from(`${registry.username}:${registry.password}`).toString('base64') } } };
    await cluster.kubeConfig.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: AGENT_NAMESPACE,
      body: { metadata: { name: 'team-pull' }, type: 'kubernetes.io/dockerconfigjson', data: { '.dockerconfigjson': Buffer.from(JSON.stringify(dockerConfig)).toString('base64') } },
    });
    const issued = registry.tokenIssuer!.log.length;
    const run = await agentOnce(noNodeSecret);
    expect(run.code, run.output).toBe(0);
    const set = await setStatus('by-secret');
    expect(set && isSetDone(set)).toBe(true);
    expect(set?.images[0]).toMatchObject({ name: image(), state: 'Pinned', attempts: 1 });
    expect(await criPinned(image())).toBe(true);
    expect(registry.tokenIssuer!.log.slice(issued)).toContainEqual(expect.objectContaining({
      authenticated: true,
      granted: [{ type: 'repository', name: truth.componentRepository, actions: ['pull'] }],
    }));
  });
});

describe('pull secret: quay.io images through a mirror that requires it', () => {
  const image = () => `quay.io/${truth.componentRepository}@${MIRRORED}`;

  it('fails when only the agent has the credentials: CRI-O does not send the CRI auth to a mirror', async () => {
    await createSet('mirrored', [image()]);
    const issued = registry.tokenIssuer!.log.length;
    // What a kubelet passes for a quay.io image: the quay.io entry, here holding the mirror's credentials.
    const run = await agentOnce(await kubeletConfig('config-quay.json', { 'quay.io': { username: registry.username!, password: registry.password! } }));
    expect(run.code, run.output).toBe(1);
    // The mirror's token realm was asked, never with credentials.
    const requests = registry.tokenIssuer!.log.slice(issued);
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.filter((request) => request.hadAuthorization)).toEqual([]);
    const set = await setStatus('mirrored');
    expect(set?.lastFailedGeneration).toBe(1);
    expect(set?.images[0]?.lastError).toContain(`Mirrors also failed: [${registry.host}/`);
    expect(set?.images[0]?.lastError).toMatch(UNAUTHORIZED);
    expect(await criPinned(image())).toBe('absent');
  });

  it("pulls and pins when the node's pull secret, also CRI-O's auth file, holds the mirror's credentials", async () => {
    // As on OpenShift: one config.json, read by the agent and by CRI-O (global_auth_file).
    const credentials = { username: registry.username!, password: registry.password! };
    const config = await kubeletConfig('config-mirror.json', { 'quay.io': credentials, [registry.host]: credentials });
    await writeFile(crioAuthFile, await readFile(config));
    const run = await agentOnce(config);
    expect(run.code, run.output).toBe(0);
    const set = await setStatus('mirrored');
    expect(set && isSetDone(set)).toBe(true);
    expect(await criPinned(image())).toBe(true);
  });
});

describe('pull secret hygiene', () => {
  it('never shows the password in the agent output or in NodePinnedImages', async () => {
    expect(outputs.length).toBeGreaterThanOrEqual(5);
    const status = await nodeStatusJson();
    for (const secret of secrets()) {
      for (const output of outputs) expect(output).not.toContain(secret);
      expect(status).not.toContain(secret);
    }
  });
});
