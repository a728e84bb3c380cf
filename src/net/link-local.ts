/**
 * Link-local addresses (169.254.0.0/16, fe80::/10) and the cloud metadata services on them
 * (169.254.169.254; AWS's fd00:ec2::254): no registry, token service or CDN serves from there, and
 * a request a registry steers there is the classic way to make a client read a node's cloud
 * credentials. prestage never follows a registry's pointer to one.
 */
import { BlockList, isIP } from 'node:net';

const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');
LINK_LOCAL.addAddress('fd00:ec2::254', 'ipv6');

/** Whether a URL's hostname is a literal link-local or metadata address (IPv4-mapped IPv6 included). */
export function isLinkLocalHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(host);
  if (mapped) return LINK_LOCAL.check(mapped[1]!, 'ipv4');
  // `::ffff:a9fe:a9fe`, how URL writes an IPv4-mapped address.
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (hex) {
    const n = (parseInt(hex[1]!, 16) << 16) | parseInt(hex[2]!, 16);
    return LINK_LOCAL.check([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'), 'ipv4');
  }
  const family = isIP(host);
  if (family === 4) return LINK_LOCAL.check(host, 'ipv4');
  if (family === 6) return LINK_LOCAL.check(host, 'ipv6');
  return false;
}
