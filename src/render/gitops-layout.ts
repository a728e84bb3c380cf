/**
 * `plan --output-dir DIR --gitops argocd|flux`: the order "stage, then upgrade" in one repository.
 * The sets first; then a gate, a Job running `prestage wait` on them (MCO's sets have no status a
 * controller reads; Argo CD waits for a Sync hook Job to complete, Flux health-checks Jobs); then,
 * with --upgrade-to, ClusterVersion's desiredUpdate. Argo CD: sync waves in one directory. Flux:
 * one directory per step and Kustomizations chained by dependsOn, each step health-checked.
 */
import yaml from 'js-yaml';
import { API_VERSION as AGENT_API_VERSION, GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS } from '../api/prestage.js';
import type { Plan } from '../plan/types.js';
import type { SetApi } from './output-dir.js';

export const GITOPS_TOOLS = ['argocd', 'flux'] as const;
export type GitOpsTool = (typeof GITOPS_TOOLS)[number];

export interface GitOpsOptions {
  readonly tool: GitOpsTool;
  /** The image the gate Job runs: prestage's agent image (`prestage image push`, `install --image`), whose entrypoint is prestage. */
  readonly gateImage: string;
  /** ClusterVersion desiredUpdate.version, applied last. */
  readonly upgradeTo?: string;
  /** The gate's Namespace. */
  readonly namespace: string;
  /** Flux: the directory's path in the repository (Kustomization spec.path), and the GitRepository's name. */
  readonly fluxPath: string;
  readonly fluxSource: string;
}

export const GATE_NAME = 'prestage-gate';
/** How long the gate waits for staging before it fails (then the controller reports the step failed). */
export const GATE_TIMEOUT = '24h';

function dump(object: unknown): string {
  return yaml.dump(object, { lineWidth: -1, noRefs: true, sortKeys: false });
}

const documents = (objects: readonly object[]) => objects.map((object) => `---\n${dump(object)}`).join('');

/** The gate's name per release: a new release is a new Job (a Job's template cannot change). */
export function gateJobName(plan: Plan): string {
  return `${GATE_NAME}-${plan.release.version.toLowerCase().replace(/[^a-z0-9.-]+/g, '-')}`.slice(0, 63).replace(/-+$/, '');
}

/** ServiceAccount, its read-only grants (what `prestage wait` reads, nothing more), Namespace. */
export function gateAccess(namespace: string, api: SetApi): object[] {
  const read = ['get', 'list', 'watch'];
  const rules =
    api === 'prestage'
      ? [{ apiGroups: [GROUP], resources: [PINNED_IMAGE_SETS, NODE_PINNED_IMAGES], verbs: read }]
      : [{ apiGroups: ['machineconfiguration.openshift.io'], resources: ['pinnedimagesets', 'machineconfignodes', 'machineconfigpools'], verbs: read }];
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: GATE_NAME, namespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: GATE_NAME },
      rules: [
        ...rules,
        // Which nodes the sets target, by their labels.
        { apiGroups: [''], resources: ['nodes'], verbs: read },
        // Which pinning API the cluster serves (wait's backend detection).
        { apiGroups: ['apiextensions.k8s.io'], resources: ['customresourcedefinitions'], verbs: ['get'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: GATE_NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: GATE_NAME },
      subjects: [{ kind: 'ServiceAccount', name: GATE_NAME, namespace }],
    },
  ];
}

export function gateJob(plan: Plan, api: SetApi, options: GitOpsOptions, annotations: Record<string, string> = {}): object {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: gateJobName(plan), namespace: options.namespace, labels: { 'app.kubernetes.io/name': GATE_NAME, 'app.kubernetes.io/managed-by': 'prestage' }, annotations },
    spec: {
      // `wait` fails (exit 1) when a node stays degraded; the retries give the nodes more time.
      backoffLimit: 3,
      template: {
        spec: {
          serviceAccountName: GATE_NAME,
          restartPolicy: 'Never',
          containers: [
            {
              name: 'wait',
              image: options.gateImage,
              args: ['wait', ...plan.sets.map((set) => set.name), '--backend', api === 'prestage' ? 'agent' : 'mco', '--timeout', GATE_TIMEOUT, '-o', 'json'],
              securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
            },
          ],
          securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
        },
      },
    },
  };
}

/** Applied with server-side apply, so only desiredUpdate is owned (the CVO owns the rest). */
function upgrade(version: string, annotations: Record<string, string> = {}): object {
  return { apiVersion: 'config.openshift.io/v1', kind: 'ClusterVersion', metadata: { name: 'version', annotations }, spec: { desiredUpdate: { version } } };
}

const WAVE = 'argocd.argoproj.io/sync-wave';

/**
 * The files besides the sets: `sets` maps each set's file to its object. Returns every file
 * (relative path → text), the sets' included, and the kustomization(s).
 */
export function gitopsFiles(plan: Plan, api: SetApi, sets: ReadonlyMap<string, object>, extra: ReadonlyMap<string, string>, options: GitOpsOptions): Map<string, string> {
  const files = new Map<string, string>();
  const kustomization = (resources: readonly string[]) => dump({ apiVersion: 'kustomize.config.k8s.io/v1beta1', kind: 'Kustomization', resources: [...resources] });
  if (options.tool === 'argocd') {
    // Wave -1: the gate's access; 0: the sets (Healthy per the shipped Lua check on prestage.dev sets); 1: the gate; 2: the upgrade.
    files.set(`${GATE_NAME}-access.yaml`, documents(gateAccess(options.namespace, api).map((object) => withAnnotations(object, { [WAVE]: '-1' }))));
    for (const [file, object] of sets) files.set(file, dump(withAnnotations(object, { [WAVE]: '0' })));
    for (const [file, text] of extra) files.set(file, text);
    // A Sync hook: run on every sync, replaced before the next, and the wave waits for it to complete.
    files.set(`${GATE_NAME}.yaml`, dump(gateJob(plan, api, options, { 'argocd.argoproj.io/hook': 'Sync', 'argocd.argoproj.io/hook-delete-policy': 'BeforeHookCreation', [WAVE]: '1' })));
    if (options.upgradeTo) files.set('upgrade.yaml', dump(upgrade(options.upgradeTo, { [WAVE]: '2', 'argocd.argoproj.io/sync-options': 'ServerSideApply=true' })));
    files.set('kustomization.yaml', kustomization([...files.keys()]));
    return files;
  }
  const setFiles = [...sets.keys(), ...extra.keys()];
  for (const [file, object] of sets) files.set(`sets/${file}`, dump(object));
  for (const [file, text] of extra) files.set(`sets/${file}`, text);
  files.set('sets/kustomization.yaml', kustomization(setFiles));
  files.set('gate/access.yaml', documents(gateAccess(options.namespace, api)));
  files.set('gate/job.yaml', dump(gateJob(plan, api, options)));
  files.set('gate/kustomization.yaml', kustomization(['access.yaml', 'job.yaml']));
  if (options.upgradeTo) {
    files.set('upgrade/clusterversion.yaml', dump(upgrade(options.upgradeTo)));
    files.set('upgrade/kustomization.yaml', kustomization(['clusterversion.yaml']));
  }
  const base = options.fluxPath.replace(/\/+$/, '');
  const flux = (name: string, path: string, dependsOn: string | undefined, spec: Record<string, unknown>) => ({
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: { name, namespace: 'flux-system' },
    spec: { interval: '10m', ...(dependsOn ? { dependsOn: [{ name: dependsOn }] } : {}), path: `${base}/${path}`, prune: true, sourceRef: { kind: 'GitRepository', name: options.fluxSource }, ...spec },
  });
  const setChecks = api === 'prestage' ? [...sets.values()].map((object) => ({ apiVersion: AGENT_API_VERSION, kind: 'PinnedImageSet', name: (object as { metadata: { name: string } }).metadata.name })) : [];
  files.set(
    'flux-kustomizations.yaml',
    documents([
      // prestage.dev sets carry kstatus conditions: the step is healthy once every node holds them. MCO's have no status: the gate waits.
      flux('prestage-sets', 'sets', undefined, setChecks.length > 0 ? { healthChecks: setChecks, timeout: GATE_TIMEOUT } : {}),
      // force: a Job cannot be changed in place; a new release is a new Job anyway.
      flux('prestage-gate', 'gate', 'prestage-sets', { force: true, timeout: GATE_TIMEOUT, healthChecks: [{ apiVersion: 'batch/v1', kind: 'Job', name: gateJobName(plan), namespace: options.namespace }] }),
      ...(options.upgradeTo ? [flux('prestage-upgrade', 'upgrade', 'prestage-gate', { prune: false })] : []),
    ]),
  );
  return files;
}

function withAnnotations(object: object, annotations: Record<string, string>): object {
  const { metadata } = object as { metadata: { annotations?: Record<string, string> } };
  // Spread first: metadata keeps its place after apiVersion and kind.
  return { ...object, metadata: { ...metadata, annotations: { ...metadata.annotations, ...annotations } } };
}
