/**
 * `stage --link-rate` on the agent backend: the CLI's own reads of the release (manifests,
 * configs, layer tails, the payload) cross the same link the nodes pull over, so they are
 * reserved on the agents' ledger (Lease `prestage-link`) like a pull: the cap's every 5 s holds
 * the plan's reads and the first pulls after them together. Where the Lease cannot be written
 * (no agent installed, no right to), the reads are paced at the cap here alone, and one line says so.
 */
import type { Logger } from 'pino';
import { AGENT_NAME } from '../api/names.js';
import { LeaseLinkLedger, LedgerMeter, MemoryLinkLedger, type LinkLedger } from '../agent/link-share.js';
import type { KubeClient, KubeList, KubeObject } from '../kube/client.js';
import type { LinkMeter } from '../net/link-rate.js';

/** `prestage install`'s default namespace, where the agents' Leases are when no DaemonSet says otherwise. */
const DEFAULT_AGENT_NAMESPACE = 'prestage';

export async function stageLinkMeter(client: KubeClient, capBytesPerSecond: number, log: Logger): Promise<LinkMeter> {
  const namespace = await agentNamespace(client);
  const lease = new LeaseLinkLedger(client, { namespace, holder: 'prestage stage', log });
  return new LedgerMeter(new FallbackLedger(lease, (error) => log.warn(`--link-rate: cannot charge the plan's reads on Lease ${namespace}/prestage-link (${error.message}); pacing them at the cap alone`)), capBytesPerSecond);
}

/** The namespace of the agents' DaemonSet; install's default when none (or more than one) is seen. */
async function agentNamespace(client: KubeClient): Promise<string> {
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

  async start(bytes: number, capBytesPerSecond: number, signal?: AbortSignal): Promise<void> {
    if (!this.failed) {
      try {
        return await this.primary.start(bytes, capBytesPerSecond, signal);
      } catch (error) {
        if (signal?.aborted) throw error;
        this.failed = new MemoryLinkLedger();
        this.onFailure(error as Error);
      }
    }
    return this.failed.start(bytes, capBytesPerSecond, signal);
  }
}
