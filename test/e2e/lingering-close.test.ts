import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

const PROBLEM = 'application/problem+json';

/**
 * A 413 is sent on the declared Content-Length before the body is read, and the connection is
 * then closed. A client still uploading must get that answer, not a reset: the gateway reads
 * and drops the rest of the upload for a bounded time before it closes.
 */
describe('closing a connection after an early answer (lingering close)', () => {
  let f: ProxyFixture;
  let key: string;
  const big = JSON.stringify({ name: 'x'.repeat(32_000_000) });

  beforeAll(async () => {
    f = await startProxyFixture({ BODY_LIMIT: '1048576' });
    key = (await f.key({ scopes: ['events:write'] })).key;
  });
  afterAll(async () => {
    await f?.close();
  });

  const listKeys = async () =>
    (await (await fetch(`${f.gateway.url}/api/v1/api-keys`, { headers: { authorization: `Bearer ${f.admin}` } })).json()) as unknown[];

  it('fetch uploading 32 MB to a proxied route reads the 413, every time, and nothing is forwarded', async () => {
    f.origin.clear();
    for (let attempt = 0; attempt < 5; attempt++) {
      const response = await fetch(`${f.gateway.url}/api/v1/agents/1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: big,
      });
      expect(response.status).toBe(413);
      expect(response.headers.get('content-type')).toContain(PROBLEM);
      expect(await response.json()).toMatchObject({ status: 413, code: 'payload_too_large' });
    }
    expect(f.origin.received).toHaveLength(0);
  });

  it('fetch uploading 32 MB to the key-management API reads the 413 and no key is created', async () => {
    const before = (await listKeys()).length;
    for (let attempt = 0; attempt < 5; attempt++) {
      const response = await fetch(`${f.gateway.url}/api/v1/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${f.admin}`, 'content-type': 'application/json' },
        body: big,
      });
      expect(response.status).toBe(413);
      expect(await response.json()).toMatchObject({ code: 'payload_too_large' });
    }
    expect(await listKeys()).toHaveLength(before);
  });

  it('a request pipelined after the refused body is neither answered, forwarded nor carried out', async () => {
    f.origin.clear();
    const before = (await listKeys()).length;
    const body = 'x'.repeat(2_000_000);
    const post = (path: string, token: string, length: number) =>
      [`POST ${path} HTTP/1.1`, 'Host: x', `Authorization: Bearer ${token}`, 'Content-Type: application/json', `Content-Length: ${length}`, '', ''].join('\r\n');
    const create = JSON.stringify({ name: 'pipelined' });
    // The client sends everything and keeps its side open: the gateway reads the pipelined requests while lingering.
    for (const [path, token] of [['/api/v1/agents/1/events', key], ['/api/v1/api-keys', f.admin]] as const) {
      const answer = await talk(`${post(path, token, body.length)}${body}${post('/api/v1/agents/1/events', key, 2)}{}${post('/api/v1/api-keys', f.admin, create.length)}${create}`);
      expect(answer, path).toMatch(/^HTTP\/1\.1 413 /);
      expect(answer.match(/HTTP\/1\.1 /g), path).toHaveLength(1);
    }
    expect(f.origin.received).toHaveLength(0);
    expect(await listKeys()).toHaveLength(before);
  });

  /** Writes `bytes` without ever closing our side, and returns all that came back once the gateway closed. */
  function talk(bytes: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect(f.port, '127.0.0.1');
      let answer = '';
      const watchdog = setTimeout(() => {
        socket.destroy();
        reject(new Error(`still open after 15 s: ${answer.slice(0, 200)}`));
      }, 15_000);
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
      socket.on('error', () => undefined);
      socket.on('close', () => {
        clearTimeout(watchdog);
        resolve(answer);
      });
      socket.write(bytes);
    });
  }

  it('a client that stops sending mid-upload and never closes is disconnected, not held open', async () => {
    const answer = await talk(
      ['POST /api/v1/agents/1/events HTTP/1.1', 'Host: x', `Authorization: Bearer ${key}`, `Content-Length: ${big.length}`, '', big.slice(0, 100_000)].join('\r\n'),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer.toLowerCase()).toContain('connection: close');
  });
});
