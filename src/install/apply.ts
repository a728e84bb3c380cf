/**
 * Server-side apply of raw manifests through the project's KubeClient. The objects go to the API
 * server as they are (no client model in between, which would drop keys such as
 * `x-kubernetes-list-type`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ClusterError } from '../errors.js';
import { KubeClient, type KubeObject } from '../kube/client.js';
import type { ClusterCredentials } from '../kube/kubeconfig.js';

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
  SecurityContextConstraints: 'securitycontextconstraints',
  PinnedImageSet: 'pinnedimagesets',
  // install --cache (src/install/cache.ts)
  ConfigMap: 'configmaps',
  Secret: 'secrets',
  PersistentVolumeClaim: 'persistentvolumeclaims',
  Deployment: 'deployments',
  Service: 'services',
  ImageDigestMirrorSet: 'imagedigestmirrorsets',
};

export function resourcePath(manifest: Manifest): string {
  const plural = RESOURCES[manifest.kind];
  if (!plural) throw new ClusterError(`cannot apply kind ${manifest.kind}: not one prestage installs`);
  const base = manifest.apiVersion.includes('/') ? `/apis/${manifest.apiVersion}` : `/api/${manifest.apiVersion}`;
  const namespace = manifest.metadata.namespace ? `/namespaces/${encodeURIComponent(manifest.metadata.namespace)}` : '';
  return `${base}${namespace}/${plural}/${encodeURIComponent(manifest.metadata.name)}`;
}

function clientOf(cluster: KubeClient | ClusterCredentials): KubeClient {
  return cluster instanceof KubeClient ? cluster : new KubeClient(cluster);
}

/** Applies in order (CRDs and namespaces first is the caller's job); owns every field it sets. */
export async function applyServerSide(cluster: KubeClient | ClusterCredentials, manifests: readonly Manifest[], fieldManager = 'prestage'): Promise<void> {
  const client = clientOf(cluster);
  for (const manifest of manifests) {
    try {
      await client.apply(resourcePath(manifest), manifest as unknown as KubeObject, { fieldManager });
    } catch (error) {
      throw new ClusterError(`cannot apply ${manifest.kind}/${manifest.metadata.name}: ${(error as Error).message}`.replace(/\s+/g, ' '), { cause: error });
    }
  }
}

/** A new CRD serves its resources only once Established: wait, so the next command finds them. */
export async function waitForCrdsEstablished(cluster: KubeClient | ClusterCredentials, names: readonly string[], timeoutMs = 60_000): Promise<void> {
  const client = clientOf(cluster);
  const deadline = Date.now() + timeoutMs;
  for (const name of names) {
    for (;;) {
      const crd = await client.get<{ status?: { conditions?: Array<{ type: string; status: string }> } }>(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
      if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new ClusterError(`CustomResourceDefinition ${name} not Established after ${timeoutMs / 1000} s`);
      await sleep(250);
    }
  }
}

/**
 * kubectl's `--dry-run` modes, as the installer takes them (the CLI's `DryRun` has the same
 * words): `client` sends no write, `server` sends each with `dryRun=All`, `none` changes.
 */
export type DryRunMode = 'none' | 'client' | 'server';

/** What follows kubectl's word on a line of a dry run. */
export function dryRunWords(mode: DryRunMode): string {
  return mode === 'none' ? '' : ` (${mode} dry run)`;
}

/**
 * Server-side apply in a dry-run mode, one line per object as kubectl prints them. A server dry
 * run cannot check objects of a namespace that is not there yet (the API server answers 404):
 * those are named and not sent.
 */
export async function applyInMode(client: KubeClient, manifests: readonly Manifest[], mode: DryRunMode, fieldManager = 'prestage'): Promise<string[]> {
  if (mode === 'none') {
    await applyServerSide(client, manifests, fieldManager);
    return manifests.map((manifest) => `${manifest.kind.toLowerCase()}/${manifest.metadata.name} serverside-applied`);
  }
  const lines: string[] = [];
  const namespaces = new Map<string, boolean>();
  for (const manifest of manifests) {
    const line = `${manifest.kind.toLowerCase()}/${manifest.metadata.name} serverside-applied${dryRunWords(mode)}`;
    const namespace = manifest.metadata.namespace;
    if (mode === 'server' && namespace !== undefined) {
      if (!namespaces.has(namespace)) namespaces.set(namespace, (await client.find(`/api/v1/namespaces/${encodeURIComponent(namespace)}`)) !== undefined);
      if (!namespaces.get(namespace)) {
        lines.push(`${line}: not sent, namespace ${namespace} is not there yet`);
        continue;
      }
    }
    if (mode === 'server') {
      try {
        await client.apply(resourcePath(manifest), manifest as unknown as KubeObject, { fieldManager, dryRun: true });
      } catch (error) {
        throw new ClusterError(`cannot apply ${manifest.kind}/${manifest.metadata.name} (server dry run): ${(error as Error).message}`.replace(/\s+/g, ' '), { cause: error });
      }
    }
    lines.push(line);
  }
  return lines;
}

/**
 * Server-side apply of one object in a dry-run mode: client sends nothing, server sends it with
 * `dryRun=All`. Returns kubectl's word for what happened (or would).
 */
export async function applyObject(client: KubeClient, manifest: Manifest, mode: DryRunMode): Promise<string> {
  if (mode === 'none') {
    await applyServerSide(client, [manifest]);
    return 'applied';
  }
  const path = resourcePath(manifest);
  const before = await client.find<KubeObject>(path);
  if (mode === 'server') {
    try {
      await client.apply(path, manifest as unknown as KubeObject, { fieldManager: 'prestage', dryRun: true });
    } catch (error) {
      throw new ClusterError(`cannot apply ${manifest.kind}/${manifest.metadata.name} (server dry run): ${(error as Error).message}`.replace(/\s+/g, ' '), { cause: error });
    }
  }
  return `${before ? 'configured' : 'created'}${dryRunWords(mode)}`;
}
