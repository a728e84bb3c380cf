import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { readPathIndex, writePathIndex, type PathIndex } from './path-index.js';

const dirs: string[] = [];
afterEach(async () => Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true }))));
const temp = async () => dirs[dirs.push(await mkdtemp(join(tmpdir(), 'path-index-'))) - 1]!;
const index = (channel: string, risk = 'Risk'): PathIndex => ({ apiVersion: 'prestage.dev/v1alpha1', kind: 'BundlePath', from: '4.16.3', to: '4.17.2', channel, hops: [{ from: '4.16.3', to: '4.17.2', dir: '4.17.2', pullSpec: 'q/r@sha256:0', risks: [{ name: risk, message: 'm' }] }] });

it('writes the graph data inside the directory: a channel by its grammar, a risk name from the graph made file-safe', async () => {
  const dir = await temp();
  await expect(writePathIndex(dir, index('../../etc'))).rejects.toThrow('channel "../../etc": not a channel name');
  const files = await writePathIndex(dir, index('eus-4.18', '../../x/y'));
  expect(files).toContain(join('graph-data', 'blocked-edges', '4.17.2-------x-y.yaml'));
  expect((await readdir(join(dir, 'graph-data', 'blocked-edges')))).toEqual(['4.17.2-------x-y.yaml']);
  expect((await readPathIndex(dir))?.channel).toBe('eus-4.18');
});

it('refuses an index too large, not JSON, or with a hop directory outside', async () => {
  const dir = await temp();
  await writeFile(join(dir, 'prestage-path.json'), ' '.repeat(1024 * 1024 + 1));
  await expect(readPathIndex(dir)).rejects.toThrow(/over the 1048576-byte bound/);
  await writeFile(join(dir, 'prestage-path.json'), '{');
  await expect(readPathIndex(dir)).rejects.toThrow(/not JSON/);
  await writeFile(join(dir, 'prestage-path.json'), JSON.stringify({ ...index('eus-4.18'), hops: [{ dir: '../x' }] }));
  await expect(readPathIndex(dir)).rejects.toThrow(/is not a version directory inside/);
});
