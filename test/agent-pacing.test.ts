/**
 * Pull-slot pacing across nodes, on the real kube-apiserver of the test bed: Leases watched
 * rather than polled, expiry judged from the time the waiting node saw the Lease change, renewals
 * that fail without killing the holder, and what 1000 waiting nodes cost the API server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeasePacer, PULL_SLOT_PREFIX, type PullSlot } from '../src/agent/pacing.js';
import { KubeApiError, KubeClient, type KubeObject, type WatchEvent } from '../src/kube/client.js';
import type { ClusterCredentials } from '../src/kube/kubeconfig.js';
import { createLogger } from '../src/telemetry/log.js';
import { COLD_BUILD_TIMEOUT_MS, startCluster, type TestCluster } from './cluster/index.js';
import { waitFor } from './cluster/processes.js';

const log = createLogger(process.env.PRESTAGE_TEST_LOG ? 'debug' : 'silent');
let cluster: TestCluster;
let namespaces = 0;
const pacers: LeasePacer[] = [];

/** A KubeClient that counts its requests (watches included) and can be made to fail writes. */
class TestClient extends KubeClient {
  requests = 0;
  watches = 0;
  failWrites = false;
  /** While set, writes wait for it before they go out: a reply that comes back late. */
  holdWrites: Promise<void> | undefined;
  constructor(config: ClusterCredentials, private readonly counter?: { requests: number; watches: number }) {
    super(config);
  }

  override async request<T>(method: string, path: string, options: { query?: Record<string, string | number | boolean | undefined>; body?: unknown; contentType?: string } = {}): Promise<T> {
    this.requests++;
    if (this.counter) this.counter.requests++;
    if (this.failWrites && method !== 'GET') throw new KubeApiError(0, 'Unreachable', `${method} ${path}: injected: the API server is unreachable`);
    if (this.holdWrites && method !== 'GET') {
      // Sent and applied at once; only the reply is late.
      const reply = super.request<T>(method, path, options);
      await this.holdWrites;
      return reply;
    }
    return super.request<T>(method, path, options);
  }

  override async watch<T extends KubeObject>(path: string, query: Record<string, string | number | boolean | undefined>, onEvent: (event: WatchEvent<T>) => void, signal?: AbortSignal): Promise<void> {
    this.watches++;
    if (this.counter) this.counter.watches++;
    return super.watch<T>(path, query, onEvent, signal);
  }
}

beforeAll(async () => {
  cluster = await startCluster({ workers: 0 });
}, COLD_BUILD_TIMEOUT_MS);

afterAll(async () => {
  for (const pacer of pacers) pacer.stop();
  await cluster?.stop();
});

/** A fresh namespace per test, so slots never carry over. */
async function namespace(): Promise<string> {
  const name = `pacing-${++namespaces}`;
  await new KubeClient(cluster.kubeConfig).request('POST', '/api/v1/namespaces', { body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name } } });
  return name;
}

function pacer(client: KubeClient, options: { namespace: string; holder: string; slots?: number; leaseDurationSeconds?: number; contentionJitterMs?: number; now?: () => number }): LeasePacer {
  const made = new LeasePacer(client, { slots: 1, leaseDurationSeconds: 3, contentionJitterMs: 50, log, ...options });
  pacers.push(made);
  return made;
}

interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
}

const leaseOf = async (ns: string, slot = 0): Promise<LeaseSpec> =>
  (await new KubeClient(cluster.kubeConfig).get<{ spec?: LeaseSpec }>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${PULL_SLOT_PREFIX}${slot}`)).spec ?? {};

const holderOf = async (ns: string, slot = 0) => (await leaseOf(ns, slot)).holderIdentity;

describe('pull slots', () => {
  it('hands a released slot to a waiting node through the watch, with no request while it waits', async () => {
    const ns = await namespace();
    const a = new TestClient(cluster.kubeConfig);
    const b = new TestClient(cluster.kubeConfig);
    const slotA = await pacer(a, { namespace: ns, holder: 'node-a', leaseDurationSeconds: 30 }).acquire();
    let slotB: PullSlot | undefined;
    const waiting = pacer(b, { namespace: ns, holder: 'node-b', leaseDurationSeconds: 30 }).acquire().then((slot) => (slotB = slot));
    await waitFor('node-b to watch', async () => (b.watches > 0 ? true : undefined));
    const before = b.requests;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // Waiting costs nothing but the open watch: no GET per slot per poll interval.
    expect(b.requests).toBe(before);
    expect(slotB).toBeUndefined();
    // When node-a's lease would run out had it not released it: its last renewal plus 30 s.
    const held = await leaseOf(ns);
    const runsOut = Date.parse(held.renewTime!) + held.leaseDurationSeconds! * 1000;
    await slotA.release();
    await waiting;
    // Handed over by the watch: node-b took the slot before node-a's lease could have run out.
    expect(Date.parse((await leaseOf(ns)).acquireTime!)).toBeLessThan(runsOut);
    expect(slotB?.held()).toBe(true);
    expect(await holderOf(ns)).toBe('node-b');
    await slotB?.release();
  });

  it('frees the slot of a node that died, once the waiting node has seen it unchanged for the lease duration', async () => {
    const ns = await namespace();
    const dying = pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-dead' });
    await dying.acquire();
    // Killed: no more renewals, no release.
    dying.stop();
    const started = Date.now();
    const slot = await pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-next' }).acquire();
    // Freed by the lease (3 s) running out, not earlier (the test's deadline bounds the rest).
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_900);
    expect(await holderOf(ns)).toBe('node-next');
    await slot.release();
  });

  it("judges expiry by its own clock: a holder whose clock is an hour behind keeps its slot while it renews", async () => {
    const ns = await namespace();
    const behind = pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-behind', now: () => Date.now() - 3_600_000 });
    const slotBehind = await behind.acquire();
    let stolen = false;
    const other = pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-other' }).acquire().then((slot) => {
      stolen = true;
      return slot;
    });
    // Three lease durations: its renewTime says "an hour ago" all along, and it is renewed every second.
    await new Promise((resolve) => setTimeout(resolve, 9_000));
    expect(stolen).toBe(false);
    expect(slotBehind.held()).toBe(true);
    expect(await holderOf(ns)).toBe('node-behind');
    await slotBehind.release();
    await (await other).release();
  });

  it('survives failed renewals: retries them, gives the slot up at the renew deadline, and never rejects', async () => {
    const ns = await namespace();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const client = new TestClient(cluster.kubeConfig);
      const slot = await pacer(client, { namespace: ns, holder: 'node-flaky' }).acquire();
      client.failWrites = true;
      const writesBefore = client.requests;
      // Renew deadline: two thirds of 3 s after the last renewal.
      await waitFor('the slot to be lost', async () => (slot.held() ? undefined : true), 10_000, 100);
      // Renewals are retried (every 0.5-1.5 s), not given up after one failure: the slot stops
      // being held at the deadline whether or not a retry fell before it, and the retry after
      // it is the one that records the loss.
      await waitFor('a renewal to be retried', async () => (client.requests - writesBefore >= 2 ? true : undefined), 5_000, 100);
      expect(client.requests - writesBefore).toBeGreaterThanOrEqual(2);
      // Another node takes the slot once it expired from its view.
      const next = await pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-next' }).acquire();
      expect(await holderOf(ns)).toBe('node-next');
      // The loser's release does not clear the winner's holder.
      await slot.release();
      expect(await holderOf(ns)).toBe('node-next');
      await next.release();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
    expect(unhandled).toEqual([]);
  });

  it('stops calling a slot its own at the renew deadline while a renewal reply is still late, before a waiting node may take it', async () => {
    const ns = await namespace();
    const client = new TestClient(cluster.kubeConfig);
    const slot = await pacer(client, { namespace: ns, holder: 'node-slow' }).acquire();
    let answer: () => void = () => undefined;
    client.holdWrites = new Promise<void>((resolve) => (answer = resolve));
    let taken = 0;
    const next = pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-next' }).acquire().then((won) => {
      taken = Date.now();
      return won;
    });
    // The renewal at 1 s is sent and applied; its reply never comes while we watch.
    await waitFor('the slot to be given up', async () => (slot.held() ? undefined : Date.now()), 10_000, 20);
    const givenUp = Date.now();
    expect(taken).toBe(0);
    const won = await next;
    // The waiting node saw the renewal and waited a whole lease from then: well after node-slow let go.
    expect(taken - givenUp).toBeGreaterThanOrEqual(1_000);
    expect(await holderOf(ns)).toBe('node-next');
    answer();
    expect(slot.held()).toBe(false);
    await won.release();
  });

  it('stops counting a slot as held once another node holds it (a 409 on renewal)', async () => {
    const ns = await namespace();
    const slot = await pacer(new TestClient(cluster.kubeConfig), { namespace: ns, holder: 'node-a' }).acquire();
    // An admin (or a node that judged it expired) hands the Lease to someone else.
    const admin = new KubeClient(cluster.kubeConfig);
    const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${PULL_SLOT_PREFIX}0`;
    const lease = await admin.get<{ spec: Record<string, unknown> }>(path);
    await admin.request('PUT', path, { body: { ...lease, spec: { ...lease.spec, holderIdentity: 'node-b' } } });
    await waitFor('node-a to see the slot lost', async () => (slot.held() ? undefined : true), 5_000, 100);
    await slot.release();
    expect(await holderOf(ns)).toBe('node-b');
  });
});

describe('1000 waiting nodes', () => {
  it('cost the API server a few requests per second, against thousands for polling', async () => {
    const ns = await namespace();
    const nodes = 1000;
    const slots = 10;
    const leaseSeconds = 6;
    const holdMs = 3_000;
    const windowMs = 20_000;
    const counter = { requests: 0, watches: 0 };
    const clients = Array.from({ length: nodes }, () => new TestClient(cluster.kubeConfig, counter));
    // The default contention jitter, as the agent runs.
    const simulated = clients.map((client, index) => new LeasePacer(client, { namespace: ns, holder: `node-${index}`, slots, leaseDurationSeconds: leaseSeconds, log }));
    pacers.push(...simulated);
    let pulls = 0;
    let maxHolding = 0;
    // What the pacer promises: no more than K slots that say held() at once. A holder whose
    // renewals ran late (a loaded API server) stops saying so before a waiter may take its slot.
    const holding = new Set<PullSlot>();
    let running = true;
    const loops = simulated.map(async (node) => {
      while (running) {
        const slot = await node.acquire();
        holding.add(slot);
        maxHolding = Math.max(maxHolding, [...holding].filter((held) => held.held()).length);
        pulls++;
        await new Promise((resolve) => setTimeout(resolve, holdMs));
        holding.delete(slot);
        await slot.release();
      }
    });
    // Start-up (a list and a watch per node) apart, then a steady window.
    await waitFor('every node to watch', async () => (counter.watches >= nodes ? true : undefined), 120_000, 200);
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    const startRequests = counter.requests;
    const startPulls = pulls;
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const perSecond = (counter.requests - startRequests) / (windowMs / 1000);
    const handoffs = pulls - startPulls;
    running = false;
    for (const node of simulated) node.stop();
    await Promise.race([Promise.all(loops), new Promise((resolve) => setTimeout(resolve, holdMs + 2_000))]);
    // What the polling pacer cost: every waiting node read every slot every 2 s.
    const pollingPerSecond = ((nodes - slots) * slots) / 2;
    console.log(
      `pacing, ${nodes} nodes, ${slots} slots, ${holdMs / 1000} s holds, ${leaseSeconds} s leases: ${perSecond.toFixed(1)} API requests/s over ${windowMs / 1000} s ` +
        `(${handoffs} slot hand-offs, ${(perSecond / Math.max(1, handoffs / (windowMs / 1000))).toFixed(1)} requests per hand-off; polling every 2 s: ${pollingPerSecond} GETs/s), at most ${maxHolding} holding at once`,
    );
    expect(maxHolding).toBeLessThanOrEqual(slots);
    expect(handoffs).toBeGreaterThan(0);
    expect(perSecond).toBeLessThan(pollingPerSecond / 10);
  }, 300_000);
});
