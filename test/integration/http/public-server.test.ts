import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { PublicServers } from '../../../src/http/public-server.ts';

const LIMITS = { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000, maxConnections: 3, lingerMs: 100 };

/** A connection, and whether the server has closed it (at once, for one past the bound). */
function open(host: string, port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, host, () => resolve({ socket, closed: new Promise((done) => socket.once('close', () => done())) }));
    socket.once('error', reject);
  });
}

/** Whether `socket` still gets an answer from the door: the proof it was kept. */
function answered(socket: Socket): Promise<string> {
  return new Promise((resolve) => {
    socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1').split('\r\n')[0]!));
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  });
}

describe('PublicServers: MAX_CONNECTIONS bounds every address together', () => {
  let servers: PublicServers | undefined;
  afterEach(async () => {
    servers?.closeAllConnections();
    await Promise.all((servers?.servers ?? []).map((server) => new Promise((resolve) => server.close(resolve))));
  });

  it('closes a connection past the bound on the second address, counts it, and keeps the others', async () => {
    let dropped = 0;
    servers = new PublicServers(LIMITS, { dropped: () => dropped++ });
    const first = servers.factory(() => {});
    servers.route({ listener: (_request, response) => response.end('door'), upgrade: (_request, socket) => socket.destroy() });
    await new Promise<void>((resolve) => first.listen(0, '127.0.0.1', resolve));
    const { port } = first.address() as AddressInfo;
    await servers.listenFurther('localhost', port, '127.0.0.1', async () => ['127.0.0.1', '127.0.0.2']);
    expect(servers.servers).toHaveLength(2);

    const kept = [await open('127.0.0.1', port), await open('127.0.0.1', port), await open('127.0.0.2', port)];
    const past = await open('127.0.0.2', port);
    await past.closed;
    expect(dropped).toBe(1);
    expect(await servers.connections()).toBe(3);
    for (const { socket } of kept) expect(await answered(socket)).toBe('HTTP/1.1 200 OK');

    // One closed frees its place, on either address.
    kept[0]!.socket.destroy();
    await kept[0]!.closed;
    await expect.poll(() => servers!.connections()).toBe(2);
    const again = await open('127.0.0.2', port);
    expect(await answered(again.socket)).toBe('HTTP/1.1 200 OK');
    expect(dropped).toBe(1);
  });
});
