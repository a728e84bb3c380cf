/**
 * Server-side apply of raw manifests. The objects go to the API server byte for byte (no
 * client model in between, which would drop keys such as `x-kubernetes-list-type`).
 */
import { request, type RequestOptions } from 'node:https';
import { request as plainRequest } from 'node:http';
import { ApiextensionsV1Api, type KubeConfig } from '@kubernetes/client-node';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterError } from '../errors.js';

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  [key: string]: unknown;
}

/** The kinds prestage installs, by resource path segment. */
const RESOURCES: Readonly<Record<string, string>> = {
  CustomResourceDefinition: 'customresourcedefinitions',
  Namespace: 'namespaces',
  ServiceAccount: 'serviceaccounts',
  ClusterRole: 'clusterroles',
  ClusterRoleBinding: 'clusterrolebindings',
  Role: 'roles',
  RoleBinding: 'rolebindings',
  DaemonSet: 'daemonsets',
  ValidatingAdmissionPolicy: 'validatingadmissionpolicies',
  ValidatingAdmissionPolicyBinding: 'validatingadmissionpolicybindings',
  PinnedImageSet: 'pinnedimagesets',
};

export function resourcePath(manifest: Manifest): string {
  const plural = RESOURCES[manifest.kind];
  if (!plural) throw new ClusterError(`cannot apply kind ${manifest.kind}: not one prestage installs`);
  const base = manifest.apiVersion.includes('/') ? `/apis/${manifest.apiVersion}` : `/api/${manifest.apiVersion}`;
  const namespace = manifest.metadata.namespace ? `/namespaces/${encodeURIComponent(manifest.metadata.namespace)}` : '';
  return `${base}${namespace}/${plural}/${encodeURIComponent(manifest.metadata.name)}`;
}

/** Applies in order (CRDs and namespaces first is the caller's job); owns every field it sets. */
export async function applyServerSide(kubeConfig: KubeConfig, manifests: readonly Manifest[], fieldManager = 'prestage'): Promise<void> {
  for (const manifest of manifests) {
    const path = `${resourcePath(manifest)}?fieldManager=${encodeURIComponent(fieldManager)}&force=true`;
    const { status, body } = await send(kubeConfig, 'PATCH', path, JSON.stringify(manifest), 'application/apply-patch+yaml');
    if (status >= 300) {
      const message = (safeJson(body) as { message?: string } | undefined)?.message ?? body;
      throw new ClusterError(`cannot apply ${manifest.kind}/${manifest.metadata.name}: ${status} ${message}`.replace(/\s+/g, ' '));
    }
  }
}

async function send(kubeConfig: KubeConfig, method: string, path: string, body: string, contentType: string): Promise<{ status: number; body: string }> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new ClusterError('the kubeconfig has no current cluster');
  const url = new URL(path, cluster.server);
  const options: RequestOptions = {
    method,
    protocol: url.protocol,
    hostname: url.hostname,
    port: url.port,
    path: `${url.pathname}${url.search}`,
    headers: { 'content-type': contentType, accept: 'application/json', 'content-length': Buffer.byteLength(body) },
  };
  await kubeConfig.applyToHTTPSOptions(options);
  const issue = url.protocol === 'https:' ? request : plainRequest;
  return new Promise((resolve, reject) => {
    const req = issue(options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (error) => reject(new ClusterError(`cannot reach the API server at ${cluster.server}: ${error.message}`, { cause: error })));
    req.end(body);
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A new CRD serves its resources only once Established: wait, so the next command finds them. */
export async function waitForCrdsEstablished(kubeConfig: KubeConfig, names: readonly string[], timeoutMs = 60_000): Promise<void> {
  const extensions = kubeConfig.makeApiClient(ApiextensionsV1Api);
  const deadline = Date.now() + timeoutMs;
  for (const name of names) {
    for (;;) {
      const crd = await extensions.readCustomResourceDefinition({ name });
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new ClusterError(`CustomResourceDefinition ${name} not Established after ${timeoutMs / 1000} s`);
      await sleep(250);
    }
  }
}
