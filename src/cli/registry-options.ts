/** Registry flags shared by every command that reads images (plan, bundle). */
import type { Argv } from 'yargs';
import { RegistryClient } from '../registry/client.js';
import { loadPullSecrets } from '../registry/credentials.js';
import { parseMirrorRule } from '../registry/mirrors.js';
import { integerAtLeast, positiveSeconds } from './flag-values.js';
import { DEFAULT_RETRY, type RetryEvent } from '../registry/transport.js';

export interface RegistryFlags {
  'registry-config'?: string;
  'ca-file'?: string;
  'tls-verify': boolean;
  mirror: string[];
  retries: number;
  'max-concurrency': number;
  'stall-timeout': number;
}

export function withRegistryOptions<T>(y: Argv<T>): Argv<T & RegistryFlags> {
  return y
    .option('registry-config', {
      alias: ['authfile', 'a'],
      type: 'string',
      describe: 'Pull secret / auth.json (default: $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json)',
    })
    .option('ca-file', { type: 'string', describe: 'Extra PEM CA bundle trusted for registries, beside the OS trust store ($SSL_CERT_FILE, /etc/ssl/certs/ca-certificates.crt, /etc/pki/tls/certs/ca-bundle.crt)' })
    .option('tls-verify', { type: 'boolean', default: true, describe: 'Verify TLS; false also allows plain HTTP registries' })
    .option('mirror', { type: 'string', array: true, default: [] as string[], describe: 'Fetch SOURCE from MIRROR (SOURCE=MIRROR, repeatable); pullspecs keep SOURCE' })
    .option('retries', { type: 'number', default: DEFAULT_RETRY.attempts - 1, coerce: integerAtLeast('retries', 0), describe: 'Retries on throttling and transient failures' })
    .option('max-concurrency', { type: 'number', default: 32, coerce: integerAtLeast('max-concurrency', 1), describe: 'Concurrent requests per registry' })
    .option('stall-timeout', { type: 'number', default: 60, coerce: positiveSeconds('stall-timeout'), describe: 'Seconds without data before a transfer is retried' }) as unknown as Argv<T & RegistryFlags>;
}

/** `onRetry` sees each retry as a line and as an event (a RetrySummary collapses them). */
export function registryClientFrom(flags: RegistryFlags, onRetry?: (line: string, event: RetryEvent) => void): RegistryClient {
  return new RegistryClient({
    pullSecrets: loadPullSecrets(flags['registry-config']),
    tlsVerify: flags['tls-verify'],
    ...(flags['ca-file'] ? { caFile: flags['ca-file'] } : {}),
    mirrors: flags.mirror.map(parseMirrorRule),
    retry: { ...DEFAULT_RETRY, attempts: flags.retries + 1 },
    concurrency: flags['max-concurrency'],
    stallTimeoutMs: flags['stall-timeout'] * 1000,
    ...(onRetry ? { onEvent: (e) => { if (e.kind === 'retry') onRetry(`retry ${e.attempt} in ${e.delayMs} ms: ${e.reason} (${e.url})`, e); } } : {}),
  });
}
