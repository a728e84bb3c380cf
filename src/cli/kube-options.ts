/** Cluster flags shared by apply, wait, status and stage: kubeconfig, context, backend. */
import { readFileSync } from 'node:fs';
import { delimiter } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import type { Argv } from 'yargs';
import { API_VERSION as AGENT_API_VERSION } from '../api/prestage.js';
import { agentBackend } from '../cluster/agent/backend.js';
import type { BackendKind, PinningBackend } from '../cluster/backend.js';
import { detectBackend } from '../cluster/detect.js';
import { KubeClient } from '../cluster/kube.js';
import { mcoBackend } from '../cluster/mco/backend.js';
import { BadInputError } from '../errors.js';

export interface KubeFlags {
  kubeconfig?: string;
  context?: string;
  backend?: BackendKind;
}

export function withKubeOptions<T>(y: Argv<T>): Argv<T & KubeFlags> {
  return y
    .option('kubeconfig', { type: 'string', describe: 'Kubeconfig file (default: $KUBECONFIG, a list, then ~/.kube/config, then in-cluster)' })
    .option('context', { type: 'string', describe: 'Kubeconfig context to use' })
    .option('backend', { choices: ['mco', 'agent'] as const, describe: 'Pinning backend (default: MCO when the cluster serves PinnedImageSets, else the prestage agent)' }) as unknown as Argv<T & KubeFlags>;
}

/** `--kubeconfig`, else client-node's default chain: $KUBECONFIG (merged list), ~/.kube/config, in-cluster. */
export function kubeConfigFrom(flags: KubeFlags): KubeConfig {
  const config = new KubeConfig();
  try {
    if (flags.kubeconfig) config.loadFromFile(flags.kubeconfig);
    else config.loadFromDefault();
  } catch (error) {
    throw new BadInputError(`cannot read kubeconfig ${flags.kubeconfig ?? process.env.KUBECONFIG ?? ''}: ${(error as Error).message}`);
  }
  const listed = !flags.kubeconfig ? firstCurrentContext(process.env.KUBECONFIG) : undefined;
  if (listed && !flags.context) config.setCurrentContext(listed);
  if (flags.context) {
    if (!config.getContextObject(flags.context)) throw new BadInputError(`kubeconfig has no context ${flags.context}`);
    config.setCurrentContext(flags.context);
  }
  if (!config.getCurrentCluster()) throw new BadInputError('no cluster to talk to: pass --kubeconfig, set KUBECONFIG, or run in a pod');
  return config;
}

/** kubectl's rule for a KUBECONFIG list: the first file that sets current-context wins (client-node takes the last). */
function firstCurrentContext(list: string | undefined): string | undefined {
  for (const file of (list ?? '').split(delimiter).filter(Boolean)) {
    try {
      const context = (yaml.load(readFileSync(file, 'utf8')) as { 'current-context'?: string } | null)?.['current-context'];
      if (context) return context;
    } catch {
      // missing or unreadable entries are skipped, as kubectl does
    }
  }
  return undefined;
}

export async function clusterFrom(flags: KubeFlags, scriptName: string): Promise<{ client: KubeClient; backend: PinningBackend }> {
  const client = new KubeClient(kubeConfigFrom(flags));
  const kind = flags.backend ?? (await detectBackend(client, AGENT_API_VERSION, scriptName));
  return { client, backend: kind === 'mco' ? mcoBackend(client) : agentBackend(client) };
}
