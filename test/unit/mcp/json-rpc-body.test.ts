import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { assertJsonBodyHeaders, MAX_JSON_DEPTH, parseJsonRpcBody, parseStrictJson } from '../../../src/mcp/json-rpc-body.ts';

const bytes = (text: string) => Buffer.from(text, 'utf8');
const call = (name: string, id: number | string = 1) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof GatewayError) return error.code;
    throw error;
  }
  return undefined;
}

describe('parseJsonRpcBody: what is accepted, and what the upstream receives', () => {
  it('a single message: one element, not a batch, re-serialised', () => {
    const body = parseJsonRpcBody(bytes(' {"jsonrpc":"2.0",\n "id":1, "method":"ping"} '));
    expect(body).toEqual({ messages: [{ jsonrpc: '2.0', id: 1, method: 'ping' }], batch: false, serialized: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
  });

  it('a batch: its elements, in order', () => {
    const body = parseJsonRpcBody(bytes(JSON.stringify([call('list_agents', 1), call('get_agent_status', 2)])));
    expect(body.batch).toBe(true);
    expect(body.messages).toEqual([call('list_agents', 1), call('get_agent_status', 2)]);
  });

  it('the serialised body carries the decoded names the decision saw, never the escapes', () => {
    const body = parseJsonRpcBody(bytes('{"jsonrpc":"2.0","id":1,"method":"tools\\/call","params":{"name":"list\\u005fagents"}}'));
    expect(body.messages[0]).toMatchObject({ method: 'tools/call', params: { name: 'list_agents' } });
    expect(body.serialized).toBe('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents"}}');
  });

  it('a "__proto__" key stays plain data and is passed on as such', () => {
    const body = parseJsonRpcBody(bytes('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"__proto__":{"name":"x"},"name":"list_agents"}}'));
    const params = (body.messages[0] as { params: Record<string, unknown> }).params;
    expect(Object.hasOwn(params, '__proto__')).toBe(true);
    expect(params.name).toBe('list_agents');
    expect(body.serialized).toContain('"__proto__":{"name":"x"}');
  });

  const refused: Array<[string, string | Uint8Array | undefined, string]> = [
    ['no body', undefined, 'bad_request'],
    ['an empty body', '', 'bad_request'],
    ['not JSON', 'tools/call list_agents', 'bad_request'],
    ['truncated JSON', '{"jsonrpc":"2.0","id":1,', 'bad_request'],
    ['a byte-order mark', '\ufeff{"jsonrpc":"2.0","id":1,"method":"ping"}', 'bad_request'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]), 'bad_request'],
    ['a duplicate top-level key', '{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"place_outbound_call"}}', 'bad_request'],
    ['a duplicate tool name', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","name":"place_outbound_call"}}', 'bad_request'],
    ['a duplicate key spelled with an escape', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","n\\u0061me":"place_outbound_call"}}', 'bad_request'],
    ['a duplicate key deep in arguments', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","arguments":{"a":[{"agent_id":7,"agent_id":8}]}}}', 'bad_request'],
    ['a duplicate key inside one batch element', '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"id":3,"method":"ping"}]', 'bad_request'],
    ['nesting past the limit', `{"jsonrpc":"2.0","id":1,"method":"ping","params":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`, 'bad_request'],
    ['an empty batch', '[]', 'validation_failed'],
    ['a string', '"tools/call"', 'validation_failed'],
    ['null', 'null', 'validation_failed'],
    ['a nested batch', '[[{"jsonrpc":"2.0","id":1,"method":"ping"}]]', 'validation_failed'],
    ['no jsonrpc member', '{"id":1,"method":"ping"}', 'validation_failed'],
    ['jsonrpc 1.0', '{"jsonrpc":"1.0","id":1,"method":"ping"}', 'validation_failed'],
    ['one bad element of a batch', '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"id":2,"method":"ping"}]', 'validation_failed'],
  ];
  it.each(refused)('refuses %s (%s)', (_what, body, code) => {
    expect(codeOf(() => parseJsonRpcBody(typeof body === 'string' ? bytes(body) : body))).toBe(code);
  });

  it('the same keys in sibling objects are not duplicates', () => {
    expect(parseStrictJson('[{"a":1,"b":{"a":2}},{"a":3}]')).toEqual([{ a: 1, b: { a: 2 } }, { a: 3 }]);
  });

  it('strings holding braces, quotes and escaped backslashes do not confuse the key scan', () => {
    const text = '{"a":"}{\\"a\\":1,\\\\","b":"\\\\","c":{"a":"[,"}}';
    expect(parseStrictJson(text)).toEqual(JSON.parse(text));
    expect(codeOf(() => parseStrictJson('{"a":"\\\\","a":1}'))).toBe('bad_request');
  });

  it('nesting up to the limit is accepted', () => {
    const depth = MAX_JSON_DEPTH - 1;
    expect(() => parseStrictJson(`{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`)).not.toThrow();
  });
});

describe('assertJsonBodyHeaders: only one plain application/json body', () => {
  const raw = (...pairs: string[]) => ({ rawHeaders: pairs });
  const accepted: Array<[string, string[]]> = [
    ['application/json', ['Content-Type', 'application/json']],
    ['with charset=utf-8', ['content-type', 'application/json; charset=utf-8']],
    ['upper case, quoted charset', ['CONTENT-TYPE', 'Application/JSON;charset="UTF-8"']],
    ['Content-Encoding: identity', ['content-type', 'application/json', 'content-encoding', 'identity']],
  ];
  it.each(accepted)('accepts %s', (_what, headers) => {
    expect(() => assertJsonBodyHeaders(raw(...headers))).not.toThrow();
  });

  const refused: Array<[string, string[]]> = [
    ['no Content-Type', []],
    ['text/plain', ['content-type', 'text/plain']],
    ['application/json-seq', ['content-type', 'application/json-seq']],
    ['another charset', ['content-type', 'application/json; charset=utf-16']],
    ['another parameter', ['content-type', 'application/json; boundary=x']],
    ['a list', ['content-type', 'application/json, text/plain']],
    ['two Content-Type headers', ['content-type', 'application/json', 'content-type', 'text/plain']],
    ['gzip', ['content-type', 'application/json', 'content-encoding', 'gzip']],
  ];
  it.each(refused)('refuses %s with 415', (_what, headers) => {
    expect(codeOf(() => assertJsonBodyHeaders(raw(...headers)))).toBe('unsupported_media_type');
  });
});

describe('parseJsonRpcBody: maxBatch (MCP_MAX_BATCH)', () => {
  const batchOf = (count: number) => bytes(JSON.stringify(Array.from({ length: count }, (_, id) => call('list_agents', id))));

  it.each([
    ['exactly maxBatch messages pass', batchOf(3), undefined],
    ['one more is batch_too_large', batchOf(4), 'batch_too_large'],
    ['10,000 are batch_too_large, before any message is looked at', bytes(JSON.stringify(Array.from({ length: 10_000 }, () => 1))), 'batch_too_large'],
    ['a single message is not a batch', bytes(JSON.stringify(call('list_agents'))), undefined],
  ])('%s', (_what, body, code) => {
    expect(codeOf(() => parseJsonRpcBody(body, { maxBatch: 3 }))).toBe(code);
  });

  it('says the limit and the count', () => {
    expect(() => parseJsonRpcBody(batchOf(5), { maxBatch: 3 })).toThrow('A JSON-RPC batch holds at most 3 messages (this one 5)');
  });

  it('no limit unless one is given', () => {
    expect(parseJsonRpcBody(batchOf(500)).messages).toHaveLength(500);
  });
});
