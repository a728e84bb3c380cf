/**
 * Pacing across nodes: at most K nodes pull at once (MCO lets every node pull together and
 * saturates the registry or the uplink). A node pulls only while it holds one of K Leases
 * `prestage-pull-slot-<i>`; a holder that dies stops renewing and its slot expires.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CoordinationV1Api, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import type { Logger } from 'pino';

export interface PullPacer {
  /** Resolves with a release function once this node may pull. */
  acquire(): Promise<() => Promise<void>>;
}

export interface LeasePacerOptions {
  readonly namespace: string;
  /** K: how many nodes may pull at once. */
  readonly slots: number;
  /** This node's name: the Lease holder identity. */
  readonly holder: string;
  readonly leaseDurationSeconds?: number;
  readonly pollMs?: number;
  readonly log: Logger;
}

export const PULL_SLOT_PREFIX = 'prestage-pull-slot-';

export class LeasePacer implements PullPacer {
  private readonly leases: CoordinationV1Api;
  private readonly duration: number;

  constructor(kubeConfig: KubeConfig, private readonly options: LeasePacerOptions) {
    this.leases = kubeConfig.makeApiClient(CoordinationV1Api);
    this.duration = options.leaseDurationSeconds ?? 60;
  }

  async acquire(): Promise<() => Promise<void>> {
    for (let waited = false; ; waited = true) {
      for (let slot = 0; slot < this.options.slots; slot++) {
        const lease = await this.tryTake(`${PULL_SLOT_PREFIX}${slot}`).catch((error: unknown) => {
          this.options.log.warn({ slot, err: (error as Error).message }, 'pull slot lease failed');
          return undefined;
        });
        if (lease) {
          if (waited) this.options.log.info({ slot }, 'got a pull slot');
          return this.hold(lease);
        }
      }
      await sleep(this.options.pollMs ?? 2_000);
    }
  }

  /** Renews every third of the duration until released; release clears the holder. */
  private hold(lease: V1Lease): () => Promise<void> {
    let current = lease;
    const name = lease.metadata!.name!;
    const timer = setInterval(() => {
      void this.write(current, this.options.holder).then((renewed) => {
        if (renewed) current = renewed;
      });
    }, (this.duration * 1000) / 3);
    timer.unref();
    return async () => {
      clearInterval(timer);
      const latest = await this.leases.readNamespacedLease({ namespace: this.options.namespace, name }).catch(() => undefined);
      if (latest?.spec?.holderIdentity === this.options.holder) await this.write(latest, undefined);
    };
  }

  private async tryTake(name: string): Promise<V1Lease | undefined> {
    const { namespace, holder } = this.options;
    let existing: V1Lease | undefined;
    try {
      existing = await this.leases.readNamespacedLease({ namespace, name });
    } catch (error) {
      if ((error as { code?: number }).code !== 404) throw error;
    }
    if (!existing) {
      try {
        return await this.leases.createNamespacedLease({ namespace, body: { metadata: { name, namespace }, spec: this.spec(holder) } });
      } catch (error) {
        if ((error as { code?: number }).code === 409) return undefined;
        throw error;
      }
    }
    const spec = existing.spec ?? {};
    const renewed = spec.renewTime ? new Date(spec.renewTime).getTime() : 0;
    const expired = renewed + (spec.leaseDurationSeconds ?? this.duration) * 1000 < Date.now();
    if (spec.holderIdentity && spec.holderIdentity !== holder && !expired) return undefined;
    return this.write(existing, holder);
  }

  /** Optimistic update: a 409 means another node got there first. */
  private async write(lease: V1Lease, holder: string | undefined): Promise<V1Lease | undefined> {
    try {
      return await this.leases.replaceNamespacedLease({
        namespace: this.options.namespace,
        name: lease.metadata!.name!,
        body: { ...lease, spec: holder ? this.spec(holder) : { leaseDurationSeconds: this.duration } },
      });
    } catch (error) {
      if ((error as { code?: number }).code === 409) return undefined;
      throw error;
    }
  }

  private spec(holder: string): V1Lease['spec'] {
    // MicroTime wants microseconds; client-node would send a Date with milliseconds, which the
    // API server rejects, and passes strings through.
    const now = new Date().toISOString().replace(/Z$/, '000Z') as unknown as Date;
    return { holderIdentity: holder, leaseDurationSeconds: this.duration, acquireTime: now, renewTime: now };
  }
}
