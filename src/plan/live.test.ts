import { describe, expect, it } from 'vitest';
import type { ComponentImage } from '../release/image-references.js';
import type { Classification } from './classify.js';
import { classifyLive, type LiveCluster } from './live.js';

const digest = (seed: string) => `sha256:${seed.padEnd(64, '0')}`;
const image = (name: string, seed: string): ComponentImage => ({ name, names: [name], pullSpec: `quay.io/ocp/art@${digest(seed)}`, digest: digest(seed), annotations: {} });
const container: Classification = { role: 'all', evidence: ['container of DaemonSet x/y (f.yaml), may run on any node'], reference: 'container' };
const operand: Classification = { role: 'all', evidence: ['env X_IMAGE of Deployment x/op (f.yaml): its operator may start it on any node'], reference: 'operand' };
const notApplied: Classification = { role: 'none', evidence: ['referenced only by manifests the cluster does not apply (f.yaml: capability Insights not enabled)'] };

const current = ['dns', 'router', 'etcd', 'gone', 'sdn', 'console', 'insights', 'pod', 'rhel-coreos'].map((n) => image(n, `c${n.length}${n[0]}`));
const target = ['dns', 'router', 'etcd', 'sdn', 'console', 'insights', 'pod', 'rhel-coreos', 'netpol'].map((n) => image(n, `t${n.length}${n[0]}`));
const offline = new Map<string, Classification>(target.map((c) => [c.digest, ({ sdn: operand, netpol: operand, insights: notApplied } as Record<string, Classification>)[c.name] ?? container]));
const currentOf = (name: string) => current.find((c) => c.name === name)!.digest;
const targetOf = (name: string) => target.find((c) => c.name === name)!;

const cluster: LiveCluster = {
  server: 'https://api.example.com:6443',
  release: { pullSpec: `quay.io/ocp/release@${digest('r')}`, version: '4.16.2' },
  nodes: [{ name: 'm0', role: 'control-plane' }, { name: 'w0', role: 'worker' }, { name: 'w1', role: 'worker' }, { name: 'w2', role: 'worker' }],
  pods: [
    ...['m0', 'w0', 'w1', 'w2'].map((node) => ({ workload: 'openshift-dns/dns-default', node, digests: [currentOf('dns')] })),
    // A Pod an update already rolled runs the target's digest.
    { workload: 'openshift-ingress/router-default', node: 'w0', digests: [targetOf('router').digest] },
    { workload: 'openshift-ingress/router-default', node: 'w1', digests: [currentOf('router')] },
    { workload: 'openshift-etcd/etcd', node: 'm0', digests: [currentOf('etcd')] },
    { workload: 'openshift-x/gone', node: 'w2', digests: [currentOf('gone')] },
    { workload: 'openshift-insights/insights', node: 'm0', digests: [currentOf('insights')] },
    { workload: 'shop/web', node: 'w0', digests: [digest('app')] },
    { workload: 'shop/elsewhere', node: 'not-a-node', digests: [currentOf('sdn')] },
  ],
};

const plan = classifyLive({ cluster, current: { version: '4.16.2', digest: digest('r'), components: current }, target: { version: '4.16.3', components: target }, offline, forced: [] });
const of = (name: string) => plan.classifications.get(targetOf(name).digest)!;

describe('live-cluster classification', () => {
  it('puts a component on the roles whose nodes run it, with what was observed', () => {
    expect(of('dns')).toEqual({ role: 'all', evidence: ['running: 4 pods on 1/1 control-plane nodes and 3/3 workers, openshift-dns/dns-default'] });
    expect(of('router')).toEqual({ role: 'worker', evidence: ['running: 2 pods on 2/3 workers, openshift-ingress/router-default'] });
    expect(of('etcd')).toEqual({ role: 'control-plane', evidence: ['running: 1 pod on 1/1 control-plane nodes, openshift-etcd/etcd'] });
  });

  it('falls back to the rules for new components and containers the target runs, and skips idle operands', () => {
    expect(of('netpol')).toEqual({ ...operand, evidence: [`new in 4.16.3: ${operand.evidence[0]}`] });
    expect(of('console')).toEqual({ ...container, evidence: [`not running now, but 4.16.3 runs it: ${container.evidence[0]}`] });
    expect(of('sdn').role).toBe('none');
    expect(of('sdn').evidence[0]).toMatch(/^not running on any node of the cluster, and 4\.16\.3 only names it as an operand its operator runs nowhere now/);
  });

  it('skips what runs now but the target does not apply, and warns about components the target drops', () => {
    expect(of('insights').role).toBe('none');
    expect(of('insights').evidence[0]).toMatch(/^running: 1 pod on 1\/1 control-plane nodes, openshift-insights\/insights; but no manifest of 4\.16\.3 the cluster applies references it/);
    expect(plan.warnings).toEqual(['gone runs on the cluster (4.16.2) but is not in 4.16.3: nothing to pin for it']);
  });

  it('puts the pause and node OS images on every role', () => {
    expect(of('pod').role).toBe('all');
    expect(of('rhel-coreos').role).toBe('all');
  });

  it('leaves components the flags force to the flags', () => {
    const forced = classifyLive({ cluster, current: { version: '4.16.2', digest: digest('r'), components: current }, target: { version: '4.16.3', components: target }, offline, forced: ['router'] });
    expect(forced.classifications.get(targetOf('router').digest)).toBe(offline.get(targetOf('router').digest));
  });

  it('counts what it saw: nodes per role, pods bound to known nodes, pods on release images', () => {
    expect(plan.observed).toEqual({ server: 'https://api.example.com:6443', release: `quay.io/ocp/release@${digest('r')}`, version: '4.16.2', nodes: { 'control-plane': 1, worker: 3 }, pods: 10, releasePods: 9 });
  });
});
