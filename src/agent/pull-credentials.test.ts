import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { API_VERSION, type NodePinnedImagesStatus, type PinnedImageSet } from '../api/prestage.js';
import type { Credential, PullSecret } from '../registry/credentials.js';
import { createLogger } from '../telemetry/log.js';
import type { AgentCluster } from './agent-cluster.js';
import { pullAuthForSets, readNodePullSecret, readSetPullSecrets } from './pull-credentials.js';
import { NodeAgent } from './reconcile.js';
import { MemoryRuntime } from '../../test/support/memory-runtime.js';

const image = (n: number) => `quay.io/ns/repo@sha256:${String(n).padStart(64, '0')}`;
const MiB = 2 ** 20;
const other = (n: number) => `registry.example/team/app@sha256:${String(n).padStart(64, '0')}`;
const secret = (source: string, entries: Record<string, Credential>): PullSecret => ({ source, entries: new Map(Object.entries(entries)) });
const set = (name: string, images: string[], secrets: string[] = []): PinnedImageSet => ({
  apiVersion: API_VERSION,
  kind: 'PinnedImageSet',
  metadata: { name },
  spec: { pinnedImages: images.map((entry) => ({ name: entry })), ...(secrets.length > 0 ? { pullSecrets: secrets.map((entry) => ({ name: entry })) } : {}) },
});

function logged() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { log: createLogger('warn', sink), messages: () => lines.map((line) => (JSON.parse(line) as { msg: string }).msg) };
}

describe('readNodePullSecret', () => {
  it('takes a missing or empty file (what a FileOrCreate hostPath makes) as no secret, silently; a broken one is a warning', () => {
    const dir = mkdtempSync(join(tmpdir(), 'prestage-secret-'));
    try {
      const { log, messages } = logged();
      const file = join(dir, 'config.json');
      expect(readNodePullSecret(undefined, log)).toEqual([]);
      expect(readNodePullSecret(file, log)).toEqual([]);
      writeFileSync(file, '');
      expect(readNodePullSecret(file, log)).toEqual([]);
      expect(messages()).toEqual([]);
      writeFileSync(file, '{not json');
      expect(readNodePullSecret(file, log)).toEqual([]);
      expect(messages()).toEqual(['pull secret unreadable; pulling anonymously']);
      writeFileSync(file, JSON.stringify({ auths: { 'quay.io': { auth: Buffer.from('u:p').toString('base64') } } }));
      expect(readNodePullSecret(file, log)[0]?.entries.get('quay.io')).toMatchObject({ username: 'u', password: 'p' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('readSetPullSecrets', () => {
  it('reads each Secret once per pass however many sets name it, and never for a set whose images are all stored', async () => {
    const reads: string[] = [];
    const team = secret('team', {});
    const { bySet, failures } = await readSetPullSecrets(
      [set('a', [image(1)], ['team']), set('b', [image(2)], ['team']), set('done', [image(3)], ['gone']), set('c', [image(4)])],
      new Set([image(3)]),
      async (name) => {
        reads.push(name);
        if (name !== 'team') throw new Error(`pull secret prestage/${name} not found`);
        return team;
      },
      createLogger('silent'),
    );
    expect(reads).toEqual(['team']);
    expect([...bySet.keys()]).toEqual(['a', 'b']);
    expect(bySet.get('a')).toEqual([team]);
    expect(failures.size).toBe(0);
  });

  it('fails a set whose Secret cannot be read, with the reason on one line, and says why in the log', async () => {
    const { log, messages } = logged();
    const result = await readSetPullSecrets([set('a', [image(1)], ['missing']), set('b', [image(2)], ['ok'])], new Set(), async (name) => (name === 'ok' ? secret('ok', {}) : Promise.reject(new Error('pull secret prestage/missing\n  not found'))), log);
    expect([...result.failures]).toEqual([['a', 'pull secret prestage/missing not found']]);
    expect([...result.bySet.keys()]).toEqual(['b']);
    expect(messages()).toEqual(['pull secret unreadable; not pulling this set']);
    const unreadable = await readSetPullSecrets([set('a', [image(1)], ['x'])], new Set(), undefined, createLogger('silent'));
    expect(unreadable.failures.get('a')).toBe('set a names pull secrets, and this agent cannot read Secrets');
  });
});

describe('pullAuthForSets', () => {
  it("tries the Secrets of the sets that list an image first, then the node's; the most specific key in a secret", () => {
    const team = secret('team', { 'quay.io/ns': { username: 'team', password: 'tp' }, 'registry.example': { identityToken: 'tok' } });
    const node = secret('node', { 'quay.io': { username: 'node', password: 'np' }, 'quay.io/ns/repo': { username: 'node-repo', password: 'nrp' } });
    const auth = pullAuthForSets([set('a', [image(1), other(2)], ['team']), set('b', [image(3)])], new Map([['a', [team]]]), [node]);
    expect(auth(image(1))).toEqual({ username: 'team', password: 'tp', serverAddress: 'quay.io' });
    expect(auth(other(2))).toEqual({ identityToken: 'tok', serverAddress: 'registry.example' });
    expect(auth(image(3))).toEqual({ username: 'node-repo', password: 'nrp', serverAddress: 'quay.io' });
    expect(auth(other(9))).toBeUndefined();
  });
});

describe("NodeAgent: the Secrets a set names in spec.pullSecrets", () => {
  const withSecrets = (name: string, images: string[], secrets: string[]): PinnedImageSet => ({ ...set(name, images, secrets), metadata: { name, generation: 1 } });

  function clusterWithSecrets(sets: PinnedImageSet[], stored: Record<string, PullSecret>) {
    const reads: string[] = [];
    let status: NodePinnedImagesStatus | undefined;
    const cluster: AgentCluster = {
      pinnedImageSets: () => sets,
      nodeLabels: () => ({ 'node-role.kubernetes.io/worker': '' }),
      readStatus: async () => status,
      writeStatus: async (next) => void (status = next),
    };
    cluster.readPullSecret = async (name) => {
      reads.push(name);
      const found = stored[name];
      if (!found) throw new Error(`pull secret prestage/${name} not found: create it (type kubernetes.io/dockerconfigjson) in namespace prestage`);
      return found;
    };
    return { cluster, reads };
  }

  it("tries a set's Secrets before the node's pull secret, for that set's images only, reading each Secret once", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'prestage-secret-'));
    try {
      const node = join(dir, 'config.json');
      writeFileSync(node, JSON.stringify({ auths: { 'quay.io': { auth: Buffer.from('node:node-pw').toString('base64') } } }));
      const runtime = new MemoryRuntime(100 * MiB);
      const { cluster, reads } = clusterWithSecrets(
        [withSecrets('a', [image(1), other(2)], ['team']), withSecrets('b', [other(3)], ['team']), withSecrets('c', [image(4)], [])],
        { team: secret('pull secret prestage/team', { 'quay.io/ns': { username: 'team', password: 'team-pw' }, 'registry.example': { username: 'team', password: 'team-pw' } }) },
      );
      const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 0, pullSecretPath: node });
      const status = await agent.reconcile();
      expect(status.pinnedImageSets?.map((entry) => entry.currentGeneration)).toEqual([1, 1, 1]);
      expect(reads).toEqual(['team']);
      expect(runtime.auths.get(image(1))).toMatchObject({ username: 'team', serverAddress: 'quay.io' });
      expect(runtime.auths.get(other(2))).toMatchObject({ username: 'team', serverAddress: 'registry.example' });
      expect(runtime.auths.get(other(3))).toMatchObject({ username: 'team' });
      // Set c names no Secret: the node's.
      expect(runtime.auths.get(image(4))).toMatchObject({ username: 'node', password: 'node-pw' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails a set whose Secret is missing, pulls nothing of it, and leaves the other sets alone; the Secret once there, it pulls', async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    const stored: Record<string, PullSecret> = {};
    const { cluster } = clusterWithSecrets([withSecrets('a', [image(1)], ['missing']), withSecrets('b', [image(2)], [])], stored);
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 2, reserveBytes: 0 });
    const first = await agent.reconcile();
    expect(runtime.pulls).toEqual([image(2)]);
    const [a, b] = first.pinnedImageSets ?? [];
    expect(a).toMatchObject({ lastFailedGeneration: 1, lastFailedGenerationError: 'pull secret prestage/missing not found: create it (type kubernetes.io/dockerconfigjson) in namespace prestage' });
    expect(a?.images.map((entry) => entry.state)).toEqual(['Pending']);
    expect(b?.currentGeneration).toBe(1);

    stored.missing = secret('pull secret prestage/missing', { 'quay.io': { username: 'u', password: 'p' } });
    const second = await agent.reconcile();
    expect(second.pinnedImageSets?.[0]).toMatchObject({ currentGeneration: 1 });
    expect(second.pinnedImageSets?.[0]?.lastFailedGenerationError).toBeUndefined();
    expect(runtime.auths.get(image(1))).toMatchObject({ username: 'u' });
  });

  it('never reads the Secrets of a set whose images are all stored: a done set does not fail when its Secret goes', async () => {
    const runtime = new MemoryRuntime(100 * MiB);
    runtime.images.set(image(1), { pinned: false });
    const { cluster, reads } = clusterWithSecrets([withSecrets('a', [image(1)], ['gone'])], {});
    const agent = new NodeAgent({ nodeName: 'n', runtime, cluster, log: createLogger('silent'), concurrency: 1, reserveBytes: 0 });
    const status = await agent.reconcile();
    expect(reads).toEqual([]);
    expect(status.pinnedImageSets?.[0]).toMatchObject({ currentGeneration: 1 });
    expect(status.pinnedImageSets?.[0]?.lastFailedGeneration).toBeUndefined();
  });
});
