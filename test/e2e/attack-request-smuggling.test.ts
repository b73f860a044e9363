import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { receivedBeforeBarrier } from '../support/origin.ts';
import { rawRequest } from '../support/raw-http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

/** Framing the gateway and the upstream could read differently is refused, never forwarded. */
describe('attack: request smuggling, duplicate and oversized headers', () => {
  let f: ProxyFixture;
  let key: string;

  beforeAll(async () => {
    f = await startProxyFixture();
    key = (await f.key({ scopes: ['events:write'] })).key;
    // Used once, so it is cached and decided at once: framing errors must win over a decided request too.
    const warm = await fetch(`${f.gateway.url}/api/v1/agents/1/events`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: '{}' });
    if (warm.status !== 200) throw new Error(`warm-up answered ${warm.status}`);
  });
  afterAll(async () => {
    await f?.close();
  });

  const head = (extra: string[]) =>
    ['POST /api/v1/agents/1/events HTTP/1.1', 'Host: x', `Authorization: Bearer ${key}`, ...extra].join('\r\n');

  // Thunks: the table is built when the tests are collected, before beforeAll has created the key.
  it.each([
    ['Content-Length and Transfer-Encoding', () => head(['Content-Length: 4', 'Transfer-Encoding: chunked', '', '0\r\n\r\nGET /dashboard HTTP/1.1\r\nHost: x\r\n\r\n'])],
    ['two Content-Length headers', () => head(['Content-Length: 2', 'Content-Length: 40', '', '{}'])],
    ['a Content-Length list', () => head(['Content-Length: 2, 2', '', '{}'])],
    ['an obs-folded header', () => head(['X-Note: a', ' folded', 'Content-Length: 2', '', '{}'])],
    ['a bare CR in a header', () => head(['X-Note: a\rb', 'Content-Length: 2', '', '{}'])],
    ['a bare LF line ending', () => 'POST /api/v1/agents/1/events HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}'],
    ['a chunked encoding that is not last', () => head(['Transfer-Encoding: chunked, identity', '', '0\r\n\r\n'])],
    ['a bad chunk size', () => head(['Transfer-Encoding: chunked', '', 'zz\r\n{}\r\n0\r\n\r\n'])],
    ['a space before the colon', () => head(['Content-Length : 2', '', '{}'])],
  ])('refuses %s with 400 and forwards nothing', async (_what, request) => {
    f.origin.clear();
    const bytes = request();
    const response = await rawRequest(f.port, bytes + (bytes.endsWith('\r\n\r\n') || bytes.includes('\r\n\r\n') ? '' : '\r\n\r\n'));
    expect(response.status).toBe(400);
    expect(await receivedBeforeBarrier(f.origin, f.gateway.url, key)).toHaveLength(0);
  });

  it('refuses two Authorization headers with 400', async () => {
    f.origin.clear();
    const response = await rawRequest(f.port, head([`Authorization: Bearer ${key}`, 'Content-Length: 2', '', '{}']));
    expect(response.status).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ code: 'duplicate_header' });
    expect(f.origin.received).toHaveLength(0);
  });

  it('refuses two Host headers with 400', async () => {
    f.origin.clear();
    const response = await rawRequest(f.port, head(['Host: y', 'Content-Length: 2', '', '{}']));
    expect(response.status).toBe(400);
    expect(f.origin.received).toHaveLength(0);
  });

  it('refuses oversized headers with 431', async () => {
    f.origin.clear();
    const response = await rawRequest(f.port, head([`X-Big: ${'a'.repeat(20_000)}`, 'Content-Length: 2', '', '{}']));
    expect(response.status).toBe(431);
    expect(f.origin.received).toHaveLength(0);
  });

  it('refuses a declared body over the limit with 413 before reading it', async () => {
    f.origin.clear();
    const response = await rawRequest(f.port, head(['Content-Type: application/json', 'Content-Length: 2000000', '', '{']));
    expect(response.status).toBe(413);
    expect(f.origin.received).toHaveLength(0);
  });

  it('stops a chunked body at the limit with 413 and the upstream never receives a complete request', async () => {
    f.origin.clear();
    const chunk = 'x'.repeat(64 * 1024);
    const chunks = Array.from({ length: 20 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('');
    const response = await rawRequest(f.port, head(['Content-Type: application/octet-stream', 'Transfer-Encoding: chunked', '', chunks + '0\r\n\r\n']));
    expect(response.status).toBe(413);
    expect(JSON.parse(response.body)).toMatchObject({ code: 'payload_too_large' });
    expect(await receivedBeforeBarrier(f.origin, f.gateway.url, key)).toHaveLength(0);
  });

  it('forwards a chunked body under the limit whole', async () => {
    f.origin.clear();
    const response = await rawRequest(f.port, head(['Content-Type: application/json', 'Transfer-Encoding: chunked', 'Connection: close', '', '2\r\n{}\r\n0\r\n\r\n']));
    expect(response.status).toBe(200);
    expect(f.origin.received.map((received) => received.body)).toEqual(['{}']);
  });

  it('a refused request gets a problem+json body', async () => {
    const response = await rawRequest(f.port, head(['Content-Length: 2', 'Content-Length: 40', '', '{}']));
    expect(response.headers['content-type']).toContain('application/problem+json');
    expect(JSON.parse(response.body)).toMatchObject({ status: 400, code: 'bad_request' });
  });
});
