import { describe, expect, it } from 'vitest';
import { installManifests, pullSlotsOf, renderInstallYaml } from './manifests.js';
import { agentLeaseNames } from './agent-access.js';

type Rule = { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] };
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;

const render = (options: Partial<Parameters<typeof installManifests>[0]> = {}) => installManifests({ namespace: 'prestage', image: 'registry.example/prestage:1', ...options }) as Any[];
const find = (manifests: Any[], kind: string, name?: string) => manifests.find((manifest) => manifest.kind === kind && (name === undefined || manifest.metadata.name === name));

describe('the Role of the agent', () => {
  it('gets only the Secrets named at install, and none without a name', () => {
    const rules = (find(render({ pullSecretNames: ['team-pull', 'robot'] }), 'Role', 'prestage-agent').rules as Rule[]).filter((rule) => rule.resources.includes('secrets'));
    expect(rules).toEqual([{ apiGroups: [''], resources: ['secrets'], resourceNames: ['team-pull', 'robot'], verbs: ['get'] }]);
    expect((find(render(), 'Role', 'prestage-agent').rules as Rule[]).filter((rule) => rule.resources.includes('secrets'))).toEqual([]);
  });

  it("updates only its own Leases by name: the pull slots --max-pulling-nodes makes, the link ledger, the cache-warm slot, the set-status writer's", () => {
    const rules = (find(render({ agentArgs: ['--max-pulling-nodes=2'] }), 'Role', 'prestage-agent').rules as Rule[]).filter((rule) => rule.resources.includes('leases'));
    const writes = rules.filter((rule) => rule.verbs.some((verb) => verb !== 'get' && verb !== 'list' && verb !== 'watch'));
    expect(writes).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['prestage-pull-slot-0', 'prestage-pull-slot-1', 'prestage-link', 'prestage-cache-warm-0', 'prestage-set-status-0'], verbs: ['update'] },
    ]);
    // No delete, no patch, nothing on any other resource of the namespace but Events.
    expect(rules.flatMap((rule) => rule.verbs).sort()).toEqual(['create', 'get', 'list', 'update', 'watch']);
  });

  it('limits Lease creates to the same names in the admission policy, which RBAC cannot', () => {
    const policy = find(render({ agentArgs: ['--max-pulling-nodes', '3'] }), 'ValidatingAdmissionPolicy', 'prestage-agent-own-leases');
    const names = policy.spec.validations.map((validation: { expression: string }) => validation.expression).find((expression: string) => expression.startsWith('object.metadata.name in'));
    expect(names).toBe(`object.metadata.name in ['prestage-pull-slot-0','prestage-pull-slot-1','prestage-pull-slot-2','prestage-link','prestage-cache-warm-0','prestage-set-status-0']`);
    expect(find(render({ admissionPolicy: false }), 'ValidatingAdmissionPolicy')).toBeUndefined();
  });

  it('counts pull slots from the last --max-pulling-nodes, in either form', () => {
    expect(pullSlotsOf({ agentArgs: [] })).toBe(0);
    expect(pullSlotsOf({ agentArgs: ['--max-pulling-nodes=4', '--max-pulling-nodes', '2'] })).toBe(2);
    expect(agentLeaseNames(0)).toEqual(['prestage-link', 'prestage-cache-warm-0', 'prestage-set-status-0']);
    expect(agentLeaseNames(0, 2)).toEqual(['prestage-link', 'prestage-cache-warm-0', 'prestage-cache-warm-leaf-0-0', 'prestage-cache-warm-leaf-1-0', 'prestage-set-status-0']);
  });
});

describe('the DaemonSet', () => {
  it('has no ptrace, no capability and no path to the whole host filesystem', () => {
    const manifests = render();
    const pod = find(manifests, 'DaemonSet').spec.template.spec;
    const container = pod.containers[0];
    expect(container.securityContext).toEqual({
      runAsUser: 0, privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] }, seLinuxOptions: { type: 'spc_t' },
    });
    expect(renderInstallYaml(manifests)).not.toMatch(/\/proc\/1|SYS_PTRACE/);
  });

  it('mounts each host path it uses at that path, read-only but for the two drop-in directories it writes', () => {
    const mounts = (options: Parameters<typeof render>[0]) => {
      const pod = find(render(options), 'DaemonSet').spec.template.spec;
      return pod.containers[0].volumeMounts.map((mount: Any) => {
        const volume = pod.volumes.find((candidate: Any) => candidate.name === mount.name);
        expect(volume.hostPath.path).toBe(mount.mountPath);
        return `${mount.mountPath} ${volume.hostPath.type} ${mount.readOnly ? 'ro' : 'rw'}`;
      });
    };
    expect(mounts({})).toEqual([
      '/var/run/crio/crio.sock Socket rw',
      '/etc/crio Directory ro',
      '/etc/crio/crio.conf.d DirectoryOrCreate rw',
      '/var/lib/kubelet/config.json FileOrCreate ro',
      '/etc/containers/registries.conf File ro',
      // The agent writes its registries drop-in there: the link relay's under a cap, the cache's with one.
      '/etc/containers/registries.conf.d Directory rw',
      '/var/lib/containers/storage Directory ro',
    ]);
    expect(mounts({ cacheMirrorArg: '--cache-mirror=quay.io=10.0.0.9:5000' })).toContain('/etc/containers/registries.conf.d DirectoryOrCreate rw');
  });

  it("is what the SCC allows, and no more: hostPID, hostPath, uid 0, no capability, a read-only root", () => {
    const manifests = render({ openshift: true });
    const scc = find(manifests, 'SecurityContextConstraints');
    const pod = find(manifests, 'DaemonSet').spec.template.spec;
    const context = pod.containers[0].securityContext;
    expect(scc).toMatchObject({
      allowHostPID: pod.hostPID, allowHostNetwork: false, allowHostIPC: false, allowPrivilegedContainer: context.privileged, allowPrivilegeEscalation: context.allowPrivilegeEscalation,
      allowedCapabilities: null, requiredDropCapabilities: context.capabilities.drop, readOnlyRootFilesystem: context.readOnlyRootFilesystem, runAsUser: { type: 'MustRunAs', uid: context.runAsUser },
    });
    expect(context.capabilities.add).toBeUndefined();
    // The pod's volumes are hostPath, plus the projected ServiceAccount token the API server adds.
    expect(new Set(pod.volumes.map((volume: Any) => Object.keys(volume).find((key) => key !== 'name')))).toEqual(new Set(['hostPath']));
    expect(scc.volumes).toEqual(['hostPath', 'projected']);
  });
});
