/**
 * What the agent's ServiceAccount may do in the API, and the admission policies that narrow it
 * where RBAC cannot: RBAC names objects (resourceNames) but not a node; a pod-bound token's
 * node-name extra does, and a ValidatingAdmissionPolicy reads it (Kubernetes 1.32+). Each grant
 * and what breaks without it: docs/node-agent.md.
 */
import { GROUP, NODE_PINNED_IMAGES, PINNED_IMAGE_SETS } from '../api/prestage.js';
import { AGENT_NAME, cacheLeafWarmLease, CACHE_WARM_LEASE, LINK_LEASE, PULL_SLOT_PREFIX, SET_STATUS_LEASE } from '../api/names.js';
import type { Manifest } from './apply.js';

/** The extra a pod-bound ServiceAccount token carries (Kubernetes 1.32+): the pod's node. */
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

export interface AgentAccessOptions {
  readonly namespace: string;
  /** The Secrets sets name in `spec.pullSecrets` (`install --pull-secret-name`): the only Secrets it may get. */
  readonly pullSecretNames: readonly string[];
  /** Pull slots (`--max-pulling-nodes`): Leases `prestage-pull-slot-0` .. `-(K-1)`. */
  readonly pullSlots: number;
  /** Leaf caches (`--cache-leaf`): each one's warm Lease `prestage-cache-warm-leaf-<i>-0`. */
  readonly cacheLeaves?: number;
  readonly admissionPolicy: boolean;
  readonly labels: Record<string, string>;
}

/** Every Lease an agent writes: the pull slots, the link ledger, the cache-warm slots (the root's, each leaf's), the set-status writer's. */
export function agentLeaseNames(pullSlots: number, cacheLeaves = 0): string[] {
  return [
    ...Array.from({ length: pullSlots }, (_, index) => `${PULL_SLOT_PREFIX}${index}`),
    LINK_LEASE,
    CACHE_WARM_LEASE,
    ...Array.from({ length: cacheLeaves }, (_, index) => cacheLeafWarmLease(index)),
    SET_STATUS_LEASE,
  ];
}

/** ClusterRole, Role and their bindings; with `admissionPolicy`, the two policies. */
export function agentAccess(options: AgentAccessOptions): Manifest[] {
  const { namespace, labels } = options;
  const subjects = [{ kind: 'ServiceAccount', name: AGENT_NAME, namespace }];
  const leases = agentLeaseNames(options.pullSlots, options.cacheLeaves ?? 0);
  const serviceAccountUser = `system:serviceaccount:${namespace}:${AGENT_NAME}`;
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: AGENT_NAME, labels },
      rules: [
        { apiGroups: [GROUP], resources: [PINNED_IMAGE_SETS], verbs: ['get', 'list', 'watch'] },
        // The agent holding the set-status Lease writes each set's Ready/Reconciling/Stalled (never its spec)
        // from every node's report, which it must therefore read.
        { apiGroups: [GROUP], resources: [`${PINNED_IMAGE_SETS}/status`], verbs: ['patch'] },
        { apiGroups: [GROUP], resources: [NODE_PINNED_IMAGES], verbs: ['list', 'watch'] },
        // Create its own object once; after that only the status subresource (no spec edits, no deletes).
        // Which node's object: the admission policy (RBAC cannot tell one node's agent from another's).
        { apiGroups: [GROUP], resources: [NODE_PINNED_IMAGES], verbs: ['get', 'create'] },
        { apiGroups: [GROUP], resources: [`${NODE_PINNED_IMAGES}/status`], verbs: ['get', 'update', 'patch'] },
        // Its own Node's labels decide which sets select it.
        { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: AGENT_NAME, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: AGENT_NAME },
      subjects,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: AGENT_NAME, namespace, labels },
      rules: [
        // Read: the pull slots are watched by label (list and watch cannot be limited to names).
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] },
        // Write: only its own Leases by name. `create` takes no resourceNames: the admission policy limits its names.
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: leases, verbs: ['update'] },
        // Warning Events about its Node, here rather than cluster-wide.
        { apiGroups: [''], resources: ['events'], verbs: ['create'] },
        // The Secrets sets name in spec.pullSecrets, each by name: not the cache's upstream credentials, nor any other.
        ...(options.pullSecretNames.length > 0 ? [{ apiGroups: [''], resources: ['secrets'], resourceNames: [...options.pullSecretNames], verbs: ['get'] }] : []),
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: AGENT_NAME, namespace, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: AGENT_NAME },
      subjects,
    },
    ...(options.admissionPolicy ? [...ownNodePolicy(serviceAccountUser, labels), ...ownLeasesPolicy(serviceAccountUser, leases, labels)] : []),
  ];
}

/** The node of the request's pod-bound token, or '' (a token bound to no pod on a node). */
const TOKEN_NODE = `has(request.userInfo.extra) && '${NODE_NAME_EXTRA}' in request.userInfo.extra && size(request.userInfo.extra['${NODE_NAME_EXTRA}']) == 1 ? request.userInfo.extra['${NODE_NAME_EXTRA}'][0] : ''`;

function policy(name: string, serviceAccountUser: string, labels: Record<string, string>, spec: Record<string, unknown>): Manifest[] {
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name, labels },
      spec: { failurePolicy: 'Fail', matchConditions: [{ name: 'is-the-agent', expression: `request.userInfo.username == '${serviceAccountUser}'` }], ...spec },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name, labels },
      spec: { policyName: name, validationActions: ['Deny'] },
    },
  ];
}

/** Only the agent of node X may write NodePinnedImages X: the node name in its pod-bound token. */
function ownNodePolicy(serviceAccountUser: string, labels: Record<string, string>): Manifest[] {
  return policy(`${AGENT_NAME}-own-node`, serviceAccountUser, labels, {
    matchConstraints: {
      resourceRules: [{ apiGroups: [GROUP], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: [NODE_PINNED_IMAGES, `${NODE_PINNED_IMAGES}/status`] }],
    },
    validations: [
      {
        expression: `has(request.userInfo.extra) && '${NODE_NAME_EXTRA}' in request.userInfo.extra && request.userInfo.extra['${NODE_NAME_EXTRA}'] == [object.metadata.name]`,
        messageExpression: `'${AGENT_NAME} may write only the NodePinnedImages of its own node, not ' + object.metadata.name`,
        reason: 'Forbidden',
      },
    ],
  });
}

/**
 * The agents' Leases: created only under their names, and holder-wise each node speaks only for
 * itself: it names no other node as holder, and frees (clears the holder of) only a Lease it
 * holds. What CEL cannot say: whether a held Lease has expired (an admission policy has no
 * clock), so a node can take another's held slot before its time; and the link ledger's entries
 * carry no node, so a node can rewrite others' charges.
 */
function ownLeasesPolicy(serviceAccountUser: string, leases: readonly string[], labels: Record<string, string>): Manifest[] {
  const holder = (of: string) => `has(${of}.spec) && has(${of}.spec.holderIdentity) ? ${of}.spec.holderIdentity : ''`;
  return policy(`${AGENT_NAME}-own-leases`, serviceAccountUser, labels, {
    matchConstraints: { resourceRules: [{ apiGroups: ['coordination.k8s.io'], apiVersions: ['*'], operations: ['CREATE', 'UPDATE'], resources: ['leases'] }] },
    variables: [
      { name: 'node', expression: TOKEN_NODE },
      { name: 'holder', expression: holder('object') },
      { name: 'oldHolder', expression: `request.operation == 'UPDATE' ? (${holder('oldObject')}) : ''` },
    ],
    validations: [
      {
        expression: `variables.node != ''`,
        message: `${AGENT_NAME} writes Leases only with a pod-bound token (one that names its node)`,
        reason: 'Forbidden',
      },
      {
        expression: `object.metadata.name in ${JSON.stringify(leases).replaceAll('"', "'")}`,
        messageExpression: `'${AGENT_NAME} may write only its own Leases (${leases.join(', ')}), not ' + object.metadata.name`,
        reason: 'Forbidden',
      },
      {
        expression: `variables.holder == '' || variables.holder == variables.node`,
        messageExpression: `'the ${AGENT_NAME} of node ' + variables.node + ' may not name ' + variables.holder + ' as the holder of Lease ' + object.metadata.name`,
        reason: 'Forbidden',
      },
      {
        expression: `variables.holder != '' || variables.oldHolder == '' || variables.oldHolder == variables.node`,
        messageExpression: `'the ${AGENT_NAME} of node ' + variables.node + ' may not free Lease ' + object.metadata.name + ', held by ' + variables.oldHolder`,
        reason: 'Forbidden',
      },
    ],
  });
}
