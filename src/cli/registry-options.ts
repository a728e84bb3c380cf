/** Registry flags shared by every command that reads or writes images (plan, stage, bundle). */
import type { Argv } from 'yargs';
import { RegistryClient } from '../registry/client.js';
import { loadPullSecrets } from '../registry/credentials.js';
import { parseMirrorRule } from '../registry/mirrors.js';
import { DEFAULT_RETRY } from '../registry/retry.js';
import type { InsecureRegistries } from '../registry/scheme.js';
import type { RetryEvent, TransportOptions } from '../registry/transport.js';
import type { LinkMeter } from '../net/link-meter.js';
import { integerAtLeast, positiveSeconds } from './flag-values.js';

export interface RegistryFlags {
  'registry-config'?: string;
  'ca-file'?: string;
  'insecure-registry': string[];
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
    .option('insecure-registry', { type: 'string', array: true, default: [] as string[], describe: 'HOST[:PORT] whose certificate is not checked and which may answer in plain HTTP (repeatable); every other registry is HTTPS, verified' })
    .option('tls-verify', { type: 'boolean', default: true, describe: 'Deprecated: false names every registry on the command line insecure; use --insecure-registry' })
    .option('mirror', { type: 'string', array: true, default: [] as string[], describe: 'Fetch SOURCE from MIRROR (SOURCE=MIRROR, repeatable); pullspecs keep SOURCE' })
    .option('retries', { type: 'number', default: DEFAULT_RETRY.attempts - 1, coerce: integerAtLeast('retries', 0), describe: 'Retries on throttling and transient failures' })
    .option('max-concurrency', { type: 'number', default: 32, coerce: integerAtLeast('max-concurrency', 1), describe: 'Concurrent requests per registry' })
    .option('stall-timeout', { type: 'string', default: 60, coerce: positiveSeconds('stall-timeout'), describe: 'Time without data, or a window of it below 1 KiB/s, before a transfer is retried (60s, 2m; bare: seconds)' }) as unknown as Argv<T & RegistryFlags>;
}

/**
 * The registries the user named insecure: `--insecure-registry`, plus with the deprecated
 * `--tls-verify=false` every registry named on the command line (references, mirror rules,
 * push targets), with a warning that says so.
 */
export function insecureRegistriesFrom(flags: RegistryFlags, warn: (line: string) => void): InsecureRegistries {
  const named = new Set(flags['insecure-registry']);
  if (flags['tls-verify'] === false) {
    const onCommandLine = namedRegistries(flags).filter((host) => !named.has(host));
    for (const host of onCommandLine) named.add(host);
    warn(`--tls-verify=false is deprecated: it now names only the registries on the command line insecure (${onCommandLine.join(', ') || 'none'}); pass --insecure-registry HOST for each instead`);
  }
  return [...named];
}

/**
 * Hosts of the image references among the flag values (`host.domain[:port]/...`,
 * `localhost[:port]/...`), and of both sides of mirror rules and push targets, which may be a
 * bare `host[:port]`.
 */
function namedRegistries(flags: object): string[] {
  const hosts = new Set<string>();
  for (const [key, value] of Object.entries(flags)) {
    const bareHostAllowed = key === 'mirror' || key === 'target';
    for (const v of [value].flat()) {
      if (typeof v !== 'string') continue;
      for (const side of v.split('=')) {
        const host = /^([a-z0-9-]+(?:\.[a-z0-9-]+)*(?::\d+)?)(\/|$)/i.exec(side);
        if (host && (host[2] === '/' || bareHostAllowed) && (host[1]!.includes('.') || host[1]!.includes(':') || /^localhost\b/.test(host[1]!))) hosts.add(host[1]!);
      }
    }
  }
  return [...hosts];
}

export function transportOptionsFrom(flags: RegistryFlags, onEvent: TransportOptions['onEvent'], warn: (line: string) => void): TransportOptions {
  return {
    pullSecrets: loadPullSecrets(flags['registry-config']),
    insecureRegistries: insecureRegistriesFrom(flags, warn),
    ...(flags['ca-file'] ? { caFile: flags['ca-file'] } : {}),
    retry: { ...DEFAULT_RETRY, attempts: flags.retries + 1 },
    concurrency: flags['max-concurrency'],
    stallTimeoutMs: flags['stall-timeout'] * 1000,
    ...(onEvent ? { onEvent } : {}),
  };
}

/** `onRetry` sees each retry as a line and as an event (a RetrySummary collapses them); `warn` prints flag warnings. */
export function registryClientFrom(flags: RegistryFlags, onRetry: ((line: string, event: RetryEvent) => void) | undefined, warn: (line: string) => void, linkMeter?: LinkMeter): RegistryClient {
  return new RegistryClient({
    ...transportOptionsFrom(flags, onRetry ? (e) => { if (e.kind === 'retry') onRetry(retryLine(e), e); } : undefined, warn),
    ...(linkMeter ? { linkMeter } : {}),
    mirrors: flags.mirror.map(parseMirrorRule),
  });
}

export function retryLine(e: RetryEvent): string {
  return `retry ${e.attempt} in ${e.delayMs} ms: ${e.reason} (${e.url})`;
}
