import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { BATCH_REVISION, MCP_ACCEPT, PROTOCOL_VERSION } from '../support/mcp.ts';

// Odd answers of an upstream MCP server (docs/security.md, "Holding under abuse"): whatever the
// gateway cannot inspect with certainty never reaches the client unfiltered. A scripted
// upstream answers each request as the case says; a key holding mcp:agents must never see
// the name of a tool outside it (SECRET), whatever the upstream sends.

const SECRET = 'place_outbound_call';
const TOOLS = [{ name: 'list_agents', inputSchema: { type: 'object' } }, { name: SECRET, inputSchema: { type: 'object' } }];
const listResult = (id: unknown, extra: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, result: { tools: TOOLS, ...extra } });
const TOOLS_LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list' };
const TOOLS_CALL = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_agents', arguments: {} } };

interface Answer {
  status?: number;
  headers?: Record<string, string>;
  body: string | Buffer;
}

interface ScriptedUpstream {
  url: string;
  /** What the next requests are answered with. */
  answer: Answer;
  received: Array<{ method: string; body: string }>;
  close(): Promise<void>;
}

async function startScriptedUpstream(): Promise<ScriptedUpstream> {
  const upstream: ScriptedUpstream = { url: '', answer: { body: '' }, received: [], close: async () => {} };
  const server: Server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      upstream.received.push({ method: request.method!, body: Buffer.concat(chunks).toString() });
      const { status = 200, headers = {}, body } = upstream.answer;
      response.writeHead(status, headers);
      response.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  upstream.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  upstream.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return upstream;
}

const json = (value: unknown, type = 'application/json'): Answer => ({ headers: { 'content-type': type }, body: JSON.stringify(value) });
const events = (...data: string[]): Answer => ({ headers: { 'content-type': 'text/event-stream' }, body: data.map((each) => `event: message\ndata: ${each}\n\n`).join('') });
const LATER = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'still here' } });

describe('odd upstream answers on MCP_PATH are never passed on unfiltered', () => {
  let upstream: ScriptedUpstream;
  let gateway: GatewayProcess;
  let key: string;
  const post = async (body: unknown, method = 'POST') => {
    const response = await fetch(`${gateway.url}/mcp`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        accept: MCP_ACCEPT,
        'mcp-protocol-version': Array.isArray(body) ? BATCH_REVISION : PROTOCOL_VERSION,
        ...(method === 'POST' ? { 'content-type': 'application/json' } : {}),
      },
      ...(method === 'POST' ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, type: response.headers.get('content-type') ?? '', text: await response.text() };
  };

  beforeAll(async () => {
    upstream = await startScriptedUpstream();
    gateway = await startGateway({ UPSTREAM_URL: upstream.url, LOG_LEVEL: 'warn' });
    const admin = await loginAdmin(gateway.url);
    const created = await createKey(gateway.url, admin, { name: 'odd answers', scopes: ['mcp:agents'] });
    key = created.body.key as string;
  });
  beforeEach(() => void upstream.received.splice(0));
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  // Whole answers: 502, a JSON-RPC error with upstream_unavailable, and not a byte of the upstream's body.
  const refused: Array<[string, unknown, Answer]> = [
    ['a JSON tools list answering tools/call', TOOLS_CALL, json(listResult(1))],
    ['a tools list in the answer to another request of a batch', [TOOLS_LIST, { ...TOOLS_CALL, id: 2 }], json([listResult(1), listResult(2)])],
    ['a tools list whose id is not the tools/list request\'s', TOOLS_LIST, json(listResult(7))],
    ['Result spelled in another case (case-insensitive readers take it)', TOOLS_CALL, json({ jsonrpc: '2.0', id: 1, Result: { tools: TOOLS } })],
    ['application/json-rpc', TOOLS_LIST, json(listResult(1), 'application/json-rpc')],
    ['application/x-text/event-stream', TOOLS_LIST, { headers: { 'content-type': 'application/x-text/event-stream' }, body: `data: ${JSON.stringify(listResult(1))}\n\n` }],
    ['text/plain holding JSON', TOOLS_LIST, json(listResult(1), 'text/plain')],
    ['application/vnd.api+json', TOOLS_LIST, json(listResult(1), 'application/vnd.api+json')],
    ['JSON said to be UTF-16', TOOLS_LIST, json(listResult(1), 'application/json; charset=utf-16')],
    ['no Content-Type at all', TOOLS_LIST, { body: JSON.stringify(listResult(1)) }],
    ['a byte-order mark before the JSON', TOOLS_LIST, { headers: { 'content-type': 'application/json' }, body: `\ufeff${JSON.stringify(listResult(1))}` }],
    ['NaN in the answer', TOOLS_LIST, { headers: { 'content-type': 'application/json' }, body: JSON.stringify(listResult(1, { n: 0 })).replace('"n":0', '"n":NaN') }],
    [
      'a duplicate tools member (a first-wins parser reads the full list)',
      TOOLS_LIST,
      { headers: { 'content-type': 'application/json' }, body: `{"jsonrpc":"2.0","id":1,"result":{"tools":${JSON.stringify(TOOLS)},"tools":[]}}` },
    ],
    ['a gzip Content-Encoding', TOOLS_LIST, { headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, body: JSON.stringify(listResult(1)) }],
    ['an error status with text/html', TOOLS_LIST, { status: 500, headers: { 'content-type': 'text/html' }, body: `<pre>${JSON.stringify(listResult(1))}</pre>` }],
    ['a JSON tools list answering a GET', undefined, json(listResult(1))],
  ];
  it.each(refused)('%s: 502, nothing of it passed on', async (_what, body, answer) => {
    upstream.answer = answer;
    const response = await post(body, body === undefined ? 'GET' : 'POST');
    expect(upstream.received).toHaveLength(1);
    expect(response.status).toBe(502);
    expect(response.type).toMatch(/^application\/json/);
    expect(response.text).not.toContain(SECRET);
    expect(JSON.parse(response.text)).toMatchObject({ jsonrpc: '2.0', id: null, error: { data: { code: 'upstream_unavailable', status: 502 } } });
  });

  // Within an event stream: the event dropped, the events around it passed on.
  const dropped: Array<[string, unknown, string]> = [
    ['a tools list answering tools/call', TOOLS_CALL, JSON.stringify(listResult(1))],
    ['a tools list answering another id', TOOLS_LIST, JSON.stringify(listResult(2))],
    ['a byte-order mark', TOOLS_LIST, `\ufeff${JSON.stringify(listResult(1))}`],
    ['a duplicate tools member', TOOLS_LIST, `{"jsonrpc":"2.0","id":1,"result":{"tools":${JSON.stringify(TOOLS)},"tools":[]}}`],
    ['NaN', TOOLS_LIST, JSON.stringify(listResult(1, { n: 0 })).replace('"n":0', '"n":NaN')],
    ['single quotes (JSON5)', TOOLS_LIST, `{'jsonrpc':'2.0','id':1,'result':{'tools':${JSON.stringify(TOOLS).replaceAll('"', "'")}}}`],
  ];
  it.each(dropped)('an event with %s is dropped; the stream goes on', async (_what, body, data) => {
    upstream.answer = events(data, LATER);
    const response = await post(body);
    expect(response.status).toBe(200);
    expect(response.type).toBe('text/event-stream');
    expect(response.text).not.toContain(SECRET);
    expect(response.text).toBe(`event: message\ndata: ${LATER}\n\n`);
  });

  it('an event stream under a header field the standard does not define carries nothing through', async () => {
    upstream.answer = { headers: { 'content-type': 'text/event-stream' }, body: `Data: ${JSON.stringify(listResult(1))}\n\n` };
    const response = await post(TOOLS_LIST);
    expect(response.status).toBe(200);
    expect(response.text).not.toContain(SECRET);
  });

  // Ordinary traffic keeps working.
  it('a tools list answering tools/list is filtered, in JSON and in an event stream', async () => {
    upstream.answer = json(listResult(1));
    const answered = await post(TOOLS_LIST);
    expect(answered.status).toBe(200);
    expect(JSON.parse(answered.text)).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [TOOLS[0]] } });
    upstream.answer = events(JSON.stringify(listResult(1)));
    const streamed = await post(TOOLS_LIST);
    expect(streamed.text).toBe(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [TOOLS[0]] } })}\n\n`);
  });

  it('the answer is passed on re-serialised, as the gateway read it', async () => {
    upstream.answer = { headers: { 'content-type': 'Application/JSON; charset="UTF-8"' }, body: '{ "jsonrpc": "2.0", "id": 1, "result": { "content": [ { "type": "te\\u0078t", "text": "ok" } ] } }' };
    const response = await post(TOOLS_CALL);
    expect(response.status).toBe(200);
    expect(response.type).toBe('application/json');
    expect(response.text).toBe('{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}');
  });

  it('a 202 without a body, and an error status with a JSON-RPC error, pass with their status', async () => {
    upstream.answer = { status: 202, body: '' };
    expect(await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).toMatchObject({ status: 202, text: '' });
    upstream.answer = { status: 404, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }) };
    const notFound = await post(TOOLS_CALL);
    expect(notFound.status).toBe(404);
    expect(JSON.parse(notFound.text)).toMatchObject({ error: { code: -32001 } });
  });
});
