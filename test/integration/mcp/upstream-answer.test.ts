import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { hasNoBody, MCP_ANSWER_CACHE_CONTROL, sendCheckedAnswer, type CheckedAnswerOptions } from '../../../src/mcp/upstream-answer.ts';

const SECRET = 'place_outbound_call';
const OPTIONS: CheckedAnswerOptions = { rules: { allowed: new Set(['list_agents']), toolsListIds: new Set([1]) }, acknowledgements: false };
const LEGACY: CheckedAnswerOptions = { ...OPTIONS, acknowledgements: true };
const list = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'list_agents' }, { name: SECRET }] } });

interface Case {
  statusCode?: number;
  headers: IncomingHttpHeaders;
  body: string;
  options?: CheckedAnswerOptions;
}

/** A real ServerResponse: `sendCheckedAnswer` answers it, or rejects and the server answers 599 with the code. */
describe('sendCheckedAnswer', () => {
  let server: Server;
  let port: number;
  let next: Case;

  beforeAll(async () => {
    server = createServer((_request, response) => {
      const { statusCode = 200, headers, body, options = OPTIONS } = next;
      try {
        sendCheckedAnswer(response, 'req-1', { statusCode, headers, body: Buffer.from(body) }, options);
      } catch (error) {
        response.writeHead(599).end(error instanceof GatewayError ? error.code : String(error));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const answer = (each: Case) => {
    next = each;
    return new Promise<{ status: number; headers: IncomingHttpHeaders; text: string }>((resolve, reject) => {
      httpRequest({ port, host: '127.0.0.1', path: '/' }, (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, text }));
      })
        .on('error', reject)
        .end();
    });
  };

  it.each<[string, Case, number, string]>([
    ['JSON, filtered and re-serialised', { headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }, body: list }, 200, '{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"list_agents"}]}}'],
    ['an empty body of any type, with its status', { statusCode: 202, headers: { 'content-type': 'text/plain', 'cache-control': 'public' }, body: '' }, 202, ''],
    ['an error status with JSON', { statusCode: 404, headers: { 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"x"}}' }, 404, '{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"x"}}'],
    ['a plain acknowledgement on the legacy path', { statusCode: 202, headers: {}, body: 'Accepted', options: LEGACY }, 202, 'Accepted'],
    ['an acknowledgement the upstream calls HTML, on the legacy path', { statusCode: 202, headers: { 'content-type': 'text/html' }, body: '<script>x()</script>', options: LEGACY }, 202, '<script>x()</script>'],
    ['a plain acknowledgement elsewhere', { statusCode: 202, headers: {}, body: 'Accepted' }, 599, 'upstream_unavailable'],
    ['text holding JSON on the legacy path', { statusCode: 202, headers: { 'content-type': 'text/plain' }, body: list, options: LEGACY }, 599, 'upstream_unavailable'],
    ['text holding a UTF-7 brace on the legacy path', { statusCode: 202, headers: {}, body: '+AHs-', options: LEGACY }, 599, 'upstream_unavailable'],
    ['text with a byte beyond ASCII on the legacy path', { statusCode: 202, headers: {}, body: 'Accepté', options: LEGACY }, 599, 'upstream_unavailable'],
    ['JSON that does not parse strictly', { headers: { 'content-type': 'application/json' }, body: '{"a":1,"a":2}' }, 599, 'upstream_unavailable'],
  ])('%s', async (_what, each, status, text) => {
    const response = await answer(each);
    expect(response.status).toBe(status);
    expect(response.text).toBe(text);
    if (status !== 599) expect(response.headers['x-request-id']).toBe('req-1');
    if (status !== 599) expect(response.headers['cache-control']).toBe(MCP_ANSWER_CACHE_CONTROL);
    // An acknowledgement is sent as the plain text it was checked to be, whatever the upstream called it.
    if (status !== 599 && text !== '' && !text.startsWith('{')) {
      expect(response.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(response.headers['x-content-type-options']).toBe('nosniff');
    }
  });
});

describe('hasNoBody', () => {
  it.each<[number, IncomingHttpHeaders, boolean]>([
    [204, {}, true],
    [304, {}, true],
    [202, { 'content-length': '0' }, true],
    [202, {}, false],
    [200, { 'content-length': '2' }, false],
  ])('%i %j: %s', (status, headers, expected) => {
    expect(hasNoBody(status, headers)).toBe(expected);
  });
});
