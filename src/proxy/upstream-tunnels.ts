import type { IncomingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import { namesOf } from './upstream-headers.ts';

/** WebSocket tunnels: a client's upgraded socket joined to the upstream's, byte for byte. */

/** The open tunnels, by their client sockets: a shutdown ends them rather than wait for them. */
export class Tunnels {
  readonly #clients = new Set<Duplex>();
  #closing = false;

  /** Joins two upgraded sockets until either ends. */
  join(client: Duplex, upstream: Duplex, head: Buffer): void {
    if (this.#closing) {
      client.destroy();
      upstream.destroy();
      return;
    }
    const clients = this.#clients;
    clients.add(client);
    const end = () => {
      clients.delete(client);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Ends every tunnel, and any joined from now on at once. */
  end(): void {
    this.#closing = true;
    for (const socket of this.#clients) socket.destroy();
    this.#clients.clear();
  }
}

/**
 * The 101 for the client: the upstream's headers, with this exchange's request id instead of any
 * the upstream sent, and the gateway's own `fields` (a limited key's RateLimit) instead of the upstream's.
 */
export function switchingProtocolsHead(headers: IncomingHttpHeaders, requestId: string, fields: readonly string[] = []): string {
  let head = `HTTP/1.1 101 Switching Protocols\r\n`;
  const own = namesOf(fields);
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || name === 'x-request-id' || own.includes(name)) continue;
    for (const each of typeof value === 'string' ? [value] : value) head += `${name}: ${each}\r\n`;
  }
  for (let i = 0; i < fields.length; i += 2) head += `${fields[i]}: ${fields[i + 1]}\r\n`;
  return `${head}x-request-id: ${requestId}\r\n\r\n`;
}
