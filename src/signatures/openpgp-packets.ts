/**
 * OpenPGP packets read by hand (RFC 4880 4.2): what openpgp.js will not show, the v3 signature
 * packets Red Hat's signing service writes, and the tags of a key file before any key object is
 * built from it (a secret-key packet is refused whatever the armor said).
 */
import { inflateRawSync, inflateSync } from 'node:zlib';

export interface Packet {
  readonly tag: number;
  readonly body: Buffer;
}

/** Signatures are at most 50 KiB; what they inflate to stays small too. */
const MAX_INFLATED = 1024 * 1024;

/** The packets of a message, compressed packets opened (throws on a malformed message). */
export function packetsOf(bytes: Buffer, depth = 0): Packet[] {
  const out: Packet[] = [];
  let at = 0;
  const take = (n: number): Buffer => {
    if (at + n > bytes.length) throw new Error('unexpected end of packet data');
    at += n;
    return bytes.subarray(at - n, at);
  };
  while (at < bytes.length) {
    const head = take(1)[0]!;
    if (!(head & 0x80)) throw new Error('not an OpenPGP packet');
    let tag: number;
    const parts: Buffer[] = [];
    if (head & 0x40) {
      tag = head & 0x3f;
      for (let partial = true; partial; ) {
        const b = take(1)[0]!;
        partial = b >= 224 && b < 255;
        const length = b < 192 ? b : b < 224 ? ((b - 192) << 8) + take(1)[0]! + 192 : b === 255 ? take(4).readUInt32BE(0) : 1 << (b & 0x1f);
        parts.push(take(length));
      }
    } else {
      tag = (head >> 2) & 0x0f;
      const type = head & 3;
      parts.push(take(type === 3 ? bytes.length - at : take(1 << type).readUIntBE(0, 1 << type)));
    }
    const body = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    if (tag === 8 && depth < 2) out.push(...packetsOf(inflate(body), depth + 1));
    else out.push({ tag, body });
  }
  return out;
}

function inflate(body: Buffer): Buffer {
  const data = body.subarray(1);
  if (body[0] === 0) return data;
  if (body[0] === 1) return inflateRawSync(data, { maxOutputLength: MAX_INFLATED });
  if (body[0] === 2) return inflateSync(data, { maxOutputLength: MAX_INFLATED });
  throw new Error(`compression algorithm ${body[0]} is not supported`);
}

