/**
 * Every answer prestage reads into memory has a bound: a hostile or broken server cannot make
 * it hold more than the bound (a 400 MB token answer once cost 2.5 GB of RSS; the node agent
 * runs under a 256 Mi limit). Over the bound is one line naming the answer and the bound.
 */
import type { Readable } from 'node:stream';
import { RegistryError } from '../errors.js';

/** The bounds, each with its reason. */
export const READ_BOUNDS = {
  /** The distribution spec lets registries refuse manifests over 4 MiB; so do we. */
  manifest: 4 * 1024 * 1024,
  /** A token answer is a JWT or opaque token of a few KiB in a small JSON object; 1 MiB is hundreds of times that. */
  token: 1024 * 1024,
  /** An error body is kept only for its first message: the prefix that holds it. */
  errorPrefix: 4 * 1024,
} as const;

/** A body over the size its reader accepts (readBody's `max`). */
export class ResponseTooLarge extends Error {}

/**
 * A whole body, at most `max` bytes: over it, the body is destroyed (its connection closed, not
 * drained) and ResponseTooLarge names `where`.
 */
export function readBody(body: Readable, max: number, where: string): Promise<Buffer> {
  return collect(body, max, (total) => new ResponseTooLarge(`${where}: answer larger than ${max} bytes (${total} so far)`));
}

/**
 * A registry's answer, at most `limit` bytes; over it, a RegistryError (exit 3, final: a retry
 * would read the same) naming `what` (a URL without credentials, or an image) and the bound.
 */
export async function readBounded(body: Readable, limit: number, what: string): Promise<Buffer> {
  return collect(body, limit, () => new RegistryError(`${what}: answer larger than the ${limit}-byte bound for it; refusing it (a broken or hostile server)`));
}

/** The first `limit` bytes of a body (for an error message); the rest is not read: the body is destroyed. */
export async function readPrefix(body: Readable, limit: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      parts.push(chunk.subarray(0, limit - total));
      total += Math.min(chunk.length, limit - total);
      if (total >= limit) break;
    }
  } finally {
    if (!body.readableEnded) body.destroy();
  }
  return Buffer.concat(parts, total);
}

function collect(body: Readable, max: number, tooLarge: (total: number) => Error): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const parts: Buffer[] = [];
    let total = 0;
    let settled = false;
    const settle = (err: Error | undefined): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      if (err) reject(err);
      else resolve(parts.length === 1 ? parts[0]! : Buffer.concat(parts, total));
    };
    const onData = (chunk: Buffer): void => {
      total += chunk.length;
      if (total > max) {
        settle(tooLarge(total));
        body.destroy();
        return;
      }
      parts.push(chunk);
    };
    body.on('data', onData);
    body.once('end', () => settle(undefined));
    body.once('error', (err) => settle(err));
    // Closed before its end without an error: what a for-await over the stream throws.
    body.once('close', () => settle(body.readableEnded ? undefined : Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' })));
  });
}
