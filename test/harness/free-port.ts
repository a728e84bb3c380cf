import { createServer } from 'node:net';

/**
 * A TCP port on 127.0.0.1 that was free a moment ago. Another process can still take it
 * before the caller binds, so callers that spawn servers retry on "address already in use".
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP address for a listening socket');
  return address.port;
}
