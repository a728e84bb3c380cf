/**
 * etcd and a real kube-apiserver on loopback: secure serving with the test CA, an admin client
 * certificate, ServiceAccount token issuing, Node and RBAC authorization, and the default
 * admission chain (ValidatingAdmissionPolicy included). No controller manager or scheduler:
 * the tests play those parts themselves.
 */
import { request } from 'node:https';
import { readFile, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { Daemon, waitFor } from './processes.js';
import { freePorts } from './ports.js';
import { createPki, type ClusterPki } from './pki.js';
import type { TestbedBinaries } from './binaries.js';

export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc';

export interface ControlPlane {
  readonly apiServerUrl: string;
  readonly kubeconfigPath: string;
  readonly pki: ClusterPki;
  stop(): Promise<void>;
}

export async function startControlPlane(dir: string, binaries: TestbedBinaries): Promise<ControlPlane> {
  const pkiDir = join(dir, 'pki');
  await mkdir(pkiDir, { recursive: true });
  const [pki, [clientPort, peerPort, securePort]] = await Promise.all([createPki(pkiDir), freePorts(3)]);
  const started: Daemon[] = [];
  const stop = async () => {
    // API server first: it would otherwise log etcd connection errors while shutting down.
    for (const daemon of [...started].reverse()) await daemon.stop();
  };
  try {
    const etcdUrl = `http://127.0.0.1:${clientPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const etcd = Daemon.start({
      name: 'etcd',
      command: binaries.etcd,
      args: [
        '--name=testbed',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=testbed=${peerUrl}`,
        // Test data is thrown away: skip fsync, which dominates etcd latency on shared disks.
        '--unsafe-no-fsync',
        '--log-level=warn',
      ],
      logPath: join(dir, 'etcd.log'),
    });
    started.push(etcd);
    await etcd.whileRunning(
      waitFor('etcd /health', async () => {
        const response = await fetch(`${etcdUrl}/health`);
        return response.ok && ((await response.json()) as { health?: string }).health === 'true' ? true : undefined;
      }),
    );

    const apiServerUrl = `https://127.0.0.1:${securePort}`;
    const apiServer = Daemon.start({
      name: 'kube-apiserver',
      command: binaries['kube-apiserver'],
      args: [
        `--etcd-servers=${etcdUrl}`,
        '--bind-address=127.0.0.1',
        '--advertise-address=127.0.0.1',
        `--secure-port=${securePort}`,
        `--tls-cert-file=${pki.apiServer.certPath}`,
        `--tls-private-key-file=${pki.apiServer.keyPath}`,
        `--client-ca-file=${pki.ca.certPath}`,
        `--cert-dir=${join(dir, 'apiserver-certs')}`,
        `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
        `--api-audiences=${SERVICE_ACCOUNT_ISSUER}`,
        `--service-account-key-file=${pki.serviceAccountPublicKeyPath}`,
        `--service-account-signing-key-file=${pki.serviceAccountKeyPath}`,
        '--service-cluster-ip-range=10.0.0.0/24',
        '--authorization-mode=Node,RBAC',
        // On top of the default chain; ValidatingAdmissionPolicy is named to make it explicit.
        '--enable-admission-plugins=NodeRestriction,ValidatingAdmissionPolicy',
        '--allow-privileged=true',
        '--profiling=false',
        '--v=1',
      ],
      logPath: join(dir, 'kube-apiserver.log'),
    });
    started.push(apiServer);
    const [ca, cert, key] = await Promise.all([readFile(pki.ca.certPath), readFile(pki.admin.certPath), readFile(pki.admin.keyPath)]);
    await apiServer.whileRunning(
      waitFor('kube-apiserver /readyz', async () => ((await httpsStatus(`${apiServerUrl}/readyz`, { ca, cert, key })) === 200 ? true : undefined), 120_000, 250),
    );

    const kubeconfigPath = join(dir, 'admin.kubeconfig');
    await writeFile(kubeconfigPath, yaml.dump(kubeconfig(apiServerUrl, ca, { 'client-certificate-data': cert.toString('base64'), 'client-key-data': key.toString('base64') })));
    return { apiServerUrl, kubeconfigPath, pki, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A one-context kubeconfig for `user` (client certificate data or a bearer token). */
export function kubeconfig(server: string, ca: Buffer, user: Record<string, string>): object {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'testbed', cluster: { server, 'certificate-authority-data': ca.toString('base64') } }],
    users: [{ name: 'testbed-user', user }],
    contexts: [{ name: 'testbed', context: { cluster: 'testbed', user: 'testbed-user' } }],
    'current-context': 'testbed',
  };
}

function httpsStatus(url: string, tls: { ca: Buffer; cert: Buffer; key: Buffer }): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { ...tls, timeout: 5_000 }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    req.once('timeout', () => req.destroy(new Error('timeout')));
    req.once('error', reject);
    req.end();
  });
}
