/**
 * A TCP relay in front of a registry that resets chosen connections before any reply, at the
 * byte level: it sees TLS as TLS (a ClientHello starts with 0x16) and plain HTTP as text, so a
 * test can fail a scheme probe and then check that no plain-HTTP byte ever left the client.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface TcpConnection {
  /** The first bytes the client sent: a TLS ClientHello or an HTTP request line. */
  readonly tls: boolean;
  readonly firstLine: string;
  readonly reset: boolean;
}

export interface TcpFaults {
  /** `127.0.0.1:PORT`. */
  readonly host: string;
  readonly connections: readonly TcpConnection[];
  /** First lines of the requests reset on connections that had been relayed. */
  readonly resets: readonly string[];
  stop(): Promise<void>;
}

/**
 * `resetWhen` sees every chunk a client sends (a request on a kept-alive connection too) and
 * how many connections came before this one; true resets the connection at once.
 */
export async function startTcpFaults(upstream: string, resetWhen: (first: Buffer, index: number) => boolean): Promise<TcpFaults> {
  const [upHost, upPort] = upstream.split(':');
  const connections: TcpConnection[] = [];
  const resets: string[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.once('data', (first: Buffer) => {
      const reset = resetWhen(first, connections.length);
      connections.push({ tls: first[0] === 0x16, firstLine: first.toString('latin1').split('\r\n')[0] ?? '', reset });
      if (reset) {
        client.resetAndDestroy();
        return;
      }
      const index = connections.length - 1;
      const server = connect(Number(upPort), upHost);
      sockets.add(server);
      server.on('close', () => sockets.delete(server));
      server.write(first);
      client.on('data', (chunk: Buffer) => {
        if (resetWhen(chunk, index)) {
          resets.push(chunk.toString('latin1').split('\r\n')[0] ?? '');
          client.resetAndDestroy();
          server.destroy();
        } else {
          server.write(chunk);
        }
      });
      server.pipe(client);
      const end = (): void => {
        client.destroy();
        server.destroy();
      };
      server.on('error', end);
      client.on('error', end);
    });
    client.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('tcp relay has no port');
  return {
    host: `127.0.0.1:${address.port}`,
    connections,
    resets,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
