/**
 * Which proxy a URL goes through, read from the environment as curl reads it: `https_proxy` /
 * `HTTPS_PROXY` for https URLs, `http_proxy` / `HTTP_PROXY` for http, `all_proxy` / `ALL_PROXY`
 * for either, the lower-case name first; `no_proxy` / `NO_PROXY` lists hosts reached directly:
 * `*` for all, a name for itself and its subdomains (a leading `.` or `*.` is the same),
 * `:port` to limit an entry to one port, IP addresses and CIDR ranges. Used for registries
 * (net/dispatcher.ts) and the Kubernetes API (kube/client.ts), so both take the same route.
 */
import { BlockList, isIP } from 'node:net';
import { BadInputError } from '../errors.js';
import { redactUrl } from './redact.js';

export type ProxyEnvironment = Readonly<Record<string, string | undefined>>;

const DEFAULT_PORTS: Record<string, number> = { 'http:': 80, 'https:': 443 };

/** The proxy URL for `url`, or undefined to connect directly. */
export function proxyFor(url: URL, env: ProxyEnvironment = process.env): URL | undefined {
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  const raw = first(env, `${scheme}_proxy`) ?? first(env, 'all_proxy');
  if (!raw) return undefined;
  if (bypassed(url, first(env, 'no_proxy') ?? '')) return undefined;
  try {
    // curl reads a proxy without a scheme as http://.
    return new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`);
  } catch {
    throw new BadInputError(`${scheme}_proxy is not a URL (${redactUrl(raw)}); set it as http://host:port`);
  }
}

function first(env: ProxyEnvironment, name: string): string | undefined {
  const value = env[name.toLowerCase()] ?? env[name.toUpperCase()];
  return value?.trim() || undefined;
}

function bypassed(url: URL, noProxy: string): boolean {
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = Number(url.port) || DEFAULT_PORTS[url.protocol] || 0;
  for (const raw of noProxy.split(/[,\s]+/)) {
    const entry = raw.trim().toLowerCase();
    if (!entry) continue;
    if (entry === '*') return true;
    const { name, entryPort } = splitPort(entry);
    if (entryPort !== undefined && entryPort !== port) continue;
    if (matchesAddress(host, name)) return true;
    const suffix = name.replace(/^\*?\./, '');
    if (host === suffix || host.endsWith(`.${suffix}`)) return true;
  }
  return false;
}

/** `host:port`, `[v6]:port`, `v6`, `10.0.0.0/8`. */
function splitPort(entry: string): { name: string; entryPort: number | undefined } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return { name: bracketed[1]!, entryPort: bracketed[2] ? Number(bracketed[2]) : undefined };
  const hostPort = /^([^:]+):(\d+)$/.exec(entry);
  if (hostPort) return { name: hostPort[1]!, entryPort: Number(hostPort[2]) };
  return { name: entry, entryPort: undefined };
}

function matchesAddress(host: string, entry: string): boolean {
  const family = isIP(host);
  if (family === 0) return false;
  const [address = '', bits] = entry.split('/');
  const entryFamily = isIP(address);
  if (entryFamily !== family) return false;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  const list = new BlockList();
  if (bits === undefined) list.addAddress(address, type);
  else list.addSubnet(address, Number(bits), type);
  return list.check(host, type);
}
