import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { RequestOptions } from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import yaml from 'js-yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { BadInputError } from '../errors.js';
import { Kubeconfig, loadKubeconfig } from './kubeconfig.js';

const dir = mkdtempSync(join(tmpdir(), 'prestage-kubeconfig-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, doc: unknown): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof doc === 'string' ? doc : yaml.dump(doc));
  return path;
}

const config = (current: string | undefined, clusters: Record<string, object>, users: Record<string, object>, contexts: Record<string, { cluster: string; user: string }>) => ({
  apiVersion: 'v1',
  kind: 'Config',
  ...(current ? { 'current-context': current } : {}),
  clusters: Object.entries(clusters).map(([name, cluster]) => ({ name, cluster })),
  users: Object.entries(users).map(([name, user]) => ({ name, user })),
  contexts: Object.entries(contexts).map(([name, context]) => ({ name, context })),
});

async function optionsOf(credentials: Awaited<ReturnType<typeof loadKubeconfig>>): Promise<RequestOptions & { headers: Record<string, string> }> {
  const options: RequestOptions = { headers: { accept: 'application/json' } };
  await credentials.applyToHTTPSOptions(options);
  return options as RequestOptions & { headers: Record<string, string> };
}

const noEnv = { home: join(dir, 'no-home') };

describe('loadKubeconfig', () => {
  it('merges a KUBECONFIG list as kubectl does: first current-context and first definition of each name win, missing entries skipped', async () => {
    const first = file('list/a.yaml', config('ctx-b', { shared: { server: 'https://first.example:6443' } }, {}, {}));
    const second = file('list/b.yaml', config('ctx-a', { shared: { server: 'https://second.example:6443' }, only: { server: 'https://only.example:6443' } }, { me: { token: 'tok-b' } }, { 'ctx-a': { cluster: 'only', user: 'me' }, 'ctx-b': { cluster: 'shared', user: 'me' } }));
    const credentials = await loadKubeconfig({}, { ...noEnv, KUBECONFIG: [join(dir, 'list/missing.yaml'), first, second].join(delimiter) });
    expect(credentials.getCurrentCluster()?.server).toBe('https://first.example:6443');
    expect((await optionsOf(credentials)).headers.authorization).toBe('Bearer tok-b');
    const other = await loadKubeconfig({ context: 'ctx-a' }, { ...noEnv, KUBECONFIG: [first, second].join(delimiter) });
    expect(other.getCurrentCluster()?.server).toBe('https://only.example:6443');
  });

  it('--kubeconfig wins over KUBECONFIG, and names a missing file or context in a BadInputError', async () => {
    const path = file('explicit.yaml', config('c', { k: { server: 'https://explicit.example' } }, { u: {} }, { c: { cluster: 'k', user: 'u' } }));
    const credentials = await loadKubeconfig({ kubeconfig: path }, { ...noEnv, KUBECONFIG: join(dir, 'list/a.yaml') });
    expect(credentials.getCurrentCluster()?.server).toBe('https://explicit.example');
    await expect(loadKubeconfig({ kubeconfig: join(dir, 'nope.yaml') }, noEnv)).rejects.toThrow(new BadInputError(`cannot read kubeconfig ${join(dir, 'nope.yaml')}: ENOENT`));
    await expect(loadKubeconfig({ kubeconfig: path, context: 'prod' }, noEnv)).rejects.toThrow('kubeconfig has no context prod');
    await expect(loadKubeconfig({ kubeconfig: file('bad.yaml', 'clusters: [') }, noEnv)).rejects.toThrow(/^cannot parse kubeconfig .*bad\.yaml: /);
  });

  it('falls back to ~/.kube/config, then in-cluster config, then says what to do', async () => {
    const home = join(dir, 'home');
    file('home/.kube/config', config('c', { k: { server: 'https://home.example' } }, { u: {} }, { c: { cluster: 'k', user: 'u' } }));
    expect((await loadKubeconfig({}, { home })).getCurrentCluster()?.server).toBe('https://home.example');

    const serviceAccountDir = join(dir, 'sa');
    file('sa/token', 'sa-token-1\n');
    file('sa/ca.crt', 'CA PEM');
    const pod = await loadKubeconfig({}, { ...noEnv, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443', serviceAccountDir });
    expect(pod.getCurrentCluster()?.server).toBe('https://10.0.0.1:443');
    const options = await optionsOf(pod);
    expect(options.headers.authorization).toBe('Bearer sa-token-1');
    expect(String(options.ca)).toBe('CA PEM');

    await expect(loadKubeconfig({}, noEnv)).rejects.toThrow('no cluster to talk to: pass --kubeconfig, set KUBECONFIG, or run in a pod');
  });

  it('reads CA and client certificates inline or from files relative to their kubeconfig, with skip-verify and server name', async () => {
    file('certs/ca.pem', 'CA FROM FILE');
    file('certs/client.pem', 'CERT FROM FILE');
    file('certs/client-key.pem', 'KEY FROM FILE');
    const path = file(
      'certs/kubeconfig',
      config(
        'files',
        {
          files: { server: 'https://a.example', 'certificate-authority': 'ca.pem', 'tls-server-name': 'api.internal' },
          inline: { server: 'https://b.example', 'certificate-authority-data': Buffer.from('CA INLINE').toString('base64'), 'insecure-skip-tls-verify': true },
        },
        {
          files: { 'client-certificate': 'client.pem', 'client-key': join(dir, 'certs/client-key.pem') },
          inline: { 'client-certificate-data': Buffer.from('CERT INLINE').toString('base64'), 'client-key-data': Buffer.from('KEY INLINE').toString('base64') },
        },
        { files: { cluster: 'files', user: 'files' }, inline: { cluster: 'inline', user: 'inline' } },
      ),
    );
    const fromFiles = await optionsOf(await loadKubeconfig({ kubeconfig: path }, noEnv));
    expect([String(fromFiles.ca), String(fromFiles.cert), String(fromFiles.key), fromFiles.servername, fromFiles.rejectUnauthorized]).toEqual(['CA FROM FILE', 'CERT FROM FILE', 'KEY FROM FILE', 'api.internal', undefined]);
    expect(fromFiles.headers.authorization).toBeUndefined();
    const inline = await optionsOf(await loadKubeconfig({ kubeconfig: path, context: 'inline' }, noEnv));
    expect([String(inline.ca), String(inline.cert), String(inline.key), inline.rejectUnauthorized]).toEqual(['CA INLINE', 'CERT INLINE', 'KEY INLINE', false]);
  });

  it('a token file is read, basic auth is set, and a missing CA file is a clear error', async () => {
    file('auth/token', 'from-file\n');
    const path = file(
      'auth/kubeconfig',
      config('tf', { k: { server: 'https://k.example' }, broken: { server: 'https://k.example', 'certificate-authority': 'missing-ca.pem' } }, { tf: { tokenFile: 'token' }, basic: { username: 'admin', password: 's3cret' } }, { tf: { cluster: 'k', user: 'tf' }, basic: { cluster: 'k', user: 'basic' }, broken: { cluster: 'broken', user: 'tf' } }),
    );
    expect((await optionsOf(await loadKubeconfig({ kubeconfig: path }, noEnv))).headers.authorization).toBe('Bearer from-file');
    const basic = await optionsOf(await loadKubeconfig({ kubeconfig: path, context: 'basic' }, noEnv));
    expect([basic.auth, basic.headers.authorization]).toEqual(['admin:s3cret', undefined]);
    await expect(loadKubeconfig({ kubeconfig: path, context: 'broken' }, noEnv)).rejects.toThrow(`cannot read kubeconfig certificate-authority ${join(dir, 'auth/missing-ca.pem')}: ENOENT`);
  });

  it('runs an exec credential plugin with KUBERNETES_EXEC_INFO and its env, and reuses the credential until it expires', async () => {
    const calls = join(dir, 'exec-calls');
    const plugin = file(
      'exec/plugin.mjs',
      `#!/usr/bin/env node
import { appendFileSync } from 'node:fs';
const info = JSON.parse(process.env.KUBERNETES_EXEC_INFO);
appendFileSync(${JSON.stringify(calls)}, 'x');
console.log(JSON.stringify({ apiVersion: info.apiVersion, kind: 'ExecCredential', status: { token: process.env.PLUGIN_TOKEN + '/' + info.spec.cluster.server, expirationTimestamp: process.env.EXPIRES } }));
`,
    );
    chmodSync(plugin, 0o755);
    const exec = (expires: string) => ({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, provideClusterInfo: true, env: [{ name: 'PLUGIN_TOKEN', value: 'sso' }, { name: 'EXPIRES', value: expires }] } });
    const path = file('exec/kubeconfig', config('later', { k: { server: 'https://exec.example' } }, { later: exec(new Date(Date.now() + 3_600_000).toISOString()), expired: exec(new Date(Date.now() - 1_000).toISOString()) }, { later: { cluster: 'k', user: 'later' }, expired: { cluster: 'k', user: 'expired' } }));

    const credentials = await loadKubeconfig({ kubeconfig: path }, noEnv);
    expect((await optionsOf(credentials)).headers.authorization).toBe('Bearer sso/https://exec.example');
    await optionsOf(credentials);
    expect(readFileSync(calls, 'utf8')).toBe('x');

    const expired = await loadKubeconfig({ kubeconfig: path, context: 'expired' }, noEnv);
    await optionsOf(expired);
    await optionsOf(expired);
    expect(readFileSync(calls, 'utf8')).toBe('xxx');

    const failing = file('exec/failing', config('f', { k: { server: 'https://exec.example' } }, { f: { exec: { command: join(dir, 'exec/absent-plugin') } } }, { f: { cluster: 'k', user: 'f' } }));
    await expect(optionsOf(await loadKubeconfig({ kubeconfig: failing }, noEnv))).rejects.toThrow(/^kubeconfig exec plugin .*absent-plugin failed: /);
  });

  it('hands a proxy-url kubeconfig to client-node, and keeps the light reader otherwise', async () => {
    const path = file('proxy.yaml', config('p', { k: { server: 'https://behind.example', 'proxy-url': 'http://proxy.example:3128' } }, { u: { token: 't' } }, { p: { cluster: 'k', user: 'u' } }));
    const credentials = await loadKubeconfig({ kubeconfig: path }, noEnv);
    expect(credentials).not.toBeInstanceOf(Kubeconfig);
    expect(credentials.getCurrentCluster()).toMatchObject({ server: 'https://behind.example', proxyUrl: 'http://proxy.example:3128' });
    expect(await loadKubeconfig({ kubeconfig: join(dir, 'explicit.yaml') }, noEnv)).toBeInstanceOf(Kubeconfig);
  });
});
