/**
 * A capped `stage` on the agent backend: the CLI's own reads of the release (manifests, configs,
 * layer tails, the payload) cross the same link the nodes pull over, so they are charged on the
 * agents' ledger (Lease `prestage-link`) before they cross, like a pull: the cap's every 5 s
 * holds the plan's reads and the pulls after them together. Where the Lease cannot be read or
 * written (no agent installed, no right to), the reads are charged on a ledger of this process
 * alone, and one line says so.
 */
import type { Logger } from 'pino';
import { AGENT_NAME } from '../api/names.js';
import { LeaseLinkLedger, MemoryLinkLedger } from './link-share.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import { LedgerMeter, type LedgerMeterOptions, type LinkCharge, type LinkLedger } from '../net/link-meter.js';

/** `prestage install`'s default namespace, where the agents' Lease is when no DaemonSet says otherwise. */
const DEFAULT_AGENT_NAMESPACE = 'prestage';

/** A meter on the agents' ledger for the CLI's reads; `finish()` it once the plan is read, before applying. */
export async function planLinkMeter(client: KubeClient, capBytesPerSecond: number, warn: (line: string) => void, log: Logger, options: LedgerMeterOptions = {}): Promise<LedgerMeter> {
  const namespace = await agentNamespace(client);
  const lease = new LeaseLinkLedger(client, { namespace, holder: 'prestage stage', log });
  const ledger = new FallbackLedger(lease, (error) => warn(`--link-rate: cannot charge the plan's reads on Lease ${namespace}/prestage-link (${error.message}); holding them to the cap alone`));
  return new LedgerMeter(ledger, capBytesPerSecond, options);
}

/** The namespace of the agents' DaemonSet; install's default when none (or more than one) is seen. */
export async function agentNamespace(client: KubeClient): Promise<string> {
  try {
    const list = await client.get<KubeList<KubeObject>>(`/apis/apps/v1/daemonsets?fieldSelector=${encodeURIComponent(`metadata.name=${AGENT_NAME}`)}`);
    const namespaces = [...new Set(list.items.map((item) => item.metadata.namespace).filter((ns): ns is string => !!ns))];
    return namespaces.length === 1 ? namespaces[0]! : DEFAULT_AGENT_NAMESPACE;
  } catch {
    return DEFAULT_AGENT_NAMESPACE;
  }
}

/** The shared ledger, or after its first failure a ledger of this process alone. */
class FallbackLedger implements LinkLedger {
  private failed: MemoryLinkLedger | undefined;

  constructor(private readonly primary: LinkLedger, private readonly onFailure: (error: Error) => void) {}

  async start(bytes: number, capBytesPerSecond: number, signal?: AbortSignal, openMs?: number): Promise<LinkCharge> {
    if (!this.failed) {
      try {
        return await this.primary.start(bytes, capBytesPerSecond, signal, openMs);
      } catch (error) {
        if (signal?.aborted) throw error;
        this.failed = new MemoryLinkLedger();
        this.onFailure(error as Error);
      }
    }
    return this.failed.start(bytes, capBytesPerSecond, signal, openMs);
  }
}
