import { describe, expect, it } from 'vitest';
import { decodeMirrorValue, NO_MCP_HEADERS, type McpHeaders, type ParamHeader } from '../../../src/policy/mcp-headers.ts';
import { decideMirrors, decideOrigin, decideProtocolVersion, type McpRequestFacts } from '../../../src/policy/mcp-request.ts';

function headers(values: Partial<Omit<McpHeaders, 'params'>> & { params?: Record<string, string[]> } = {}): McpHeaders {
  return { ...NO_MCP_HEADERS, ...values, params: new Map(Object.entries(values.params ?? {})) };
}

const REGION: ParamHeader = { name: 'region', path: ['region'] };
const NESTED: ParamHeader = { name: 'tenant', path: ['scope', 'tenant'] };
const SCHEMAS = new Map<string, readonly ParamHeader[]>([
  ['execute_sql', [REGION, NESTED, { name: 'limit', path: ['limit'] }, { name: 'dry', path: ['dry'] }]],
  ['plain', []],
]);

function facts(sent: McpHeaders, batch = false): McpRequestFacts {
  return { headers: sent, allowedOrigins: new Set(), toolHeaders: { paramHeadersOf: (tool) => SCHEMAS.get(tool) }, exchange: true, batch };
}

function call(name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>) {
  return { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args, ...(meta === undefined ? {} : { _meta: meta }) } };
}

const codeOf = (decision: { allow: boolean; code?: string }) => (decision.allow ? 'allow' : decision.code);

describe('decideOrigin: the revision’s DNS-rebinding rule, applied by the gateway', () => {
  const allowed = new Set(['https://app.example']);
  it.each([
    ['no Origin (every client that is not a browser)', [], 'allow'],
    ['a listed origin', ['https://app.example'], 'allow'],
    ['a listed origin in another case', ['HTTPS://APP.EXAMPLE'], 'allow'],
    ['another origin', ['https://evil.example'], 'origin_not_allowed'],
    ['a listed origin with a port it does not list', ['https://app.example:8443'], 'origin_not_allowed'],
    ['the opaque origin', ['null'], 'origin_not_allowed'],
    ['two Origin headers, one listed', ['https://app.example', 'https://evil.example'], 'origin_not_allowed'],
  ])('%s', (_, origin, expected) => {
    expect(codeOf(decideOrigin(headers({ origin }), allowed))).toBe(expected);
  });
});

describe('decideProtocolVersion: absent, or one published revision', () => {
  it.each(['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'])('%s passes', (version) => {
    expect(codeOf(decideProtocolVersion(headers({ protocolVersion: [version] })))).toBe('allow');
  });
  it.each([
    ['garbage', ['garbage']],
    ['a date that is no revision', ['1999-01-01']],
    ['a revision with a space', ['2025-06-18 ']],
    ['two headers', ['2025-06-18', '2025-06-18']],
    ['an empty value', ['']],
  ])('%s is refused, naming what was asked for', (_, protocolVersion) => {
    const decision = decideProtocolVersion(headers({ protocolVersion }));
    expect(decision).toMatchObject({ allow: false, code: 'unsupported_protocol_version', status: 400 });
  });
  it('absent passes (revisions before 2025-06-18 send none)', () => {
    expect(codeOf(decideProtocolVersion(headers()))).toBe('allow');
  });
});

describe('decideMirrors: Mcp-Method, Mcp-Name and MCP-Protocol-Version against the message', () => {
  it.each([
    ['no mirror headers', headers(), [call('plain')], 'allow'],
    ['Mcp-Method and Mcp-Name that agree', headers({ method: ['tools/call'], name: ['plain'] }), [call('plain')], 'allow'],
    ['Mcp-Name of another tool', headers({ method: ['tools/call'], name: ['place_outbound_call'] }), [call('plain')], 'header_mismatch'],
    ['Mcp-Method of another method', headers({ method: ['tools/list'] }), [call('plain')], 'header_mismatch'],
    ['Mcp-Method in another case (values are case-sensitive)', headers({ method: ['Tools/Call'] }), [call('plain')], 'header_mismatch'],
    ['two Mcp-Name headers that agree', headers({ name: ['plain', 'plain'] }), [call('plain')], 'header_mismatch'],
    ['two Mcp-Method headers', headers({ method: ['tools/call', 'tools/call'] }), [call('plain')], 'header_mismatch'],
    ['Mcp-Name on a message without a name', headers({ name: ['x'] }), [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }], 'header_mismatch'],
    ['Mcp-Name of resources/read mirrors the uri', headers({ method: ['resources/read'], name: ['file:///a'] }), [{ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'file:///a' } }], 'allow'],
    ['Mcp-Name in the Base64 sentinel', headers({ name: [`=?base64?${Buffer.from('wörk').toString('base64')}?=`] }), [call('wörk')], 'allow'],
    ['a sentinel of another name', headers({ name: [`=?base64?${Buffer.from('other').toString('base64')}?=`] }), [call('plain')], 'header_mismatch'],
    ['a sentinel that is not Base64', headers({ name: ['=?base64?!!!?='] }), [call('plain')], 'header_mismatch'],
    ['a sentinel that is not UTF-8', headers({ name: [`=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=`] }), [call('plain')], 'header_mismatch'],
    ['a batch with mirror headers', headers({ method: ['tools/call'] }), [call('plain'), call('plain')], 'header_mismatch'],
    ['the body’s _meta revision against the header', headers({ protocolVersion: ['2026-07-28'] }), [call('plain', {}, { 'io.modelcontextprotocol/protocolVersion': '2025-11-25' })], 'header_mismatch'],
    ['the body’s _meta revision that agrees', headers({ protocolVersion: ['2026-07-28'] }), [call('plain', {}, { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' })], 'allow'],
  ])('%s', (_, sent, messages, expected) => {
    expect(codeOf(decideMirrors(facts(sent), messages))).toBe(expected);
  });

  it('a batch body without mirror headers passes (2025-03-26 batches)', () => {
    expect(codeOf(decideMirrors(facts(headers(), true), [call('plain')]))).toBe('allow');
    expect(codeOf(decideMirrors(facts(headers({ name: ['plain'] }), true), [call('plain')]))).toBe('header_mismatch');
  });
});

describe('decideMirrors: Mcp-Param-* against the arguments the tool’s schema marks', () => {
  const args = { region: 'us-west1', scope: { tenant: 'acme' }, limit: 42, dry: false, query: 'SELECT 1' };
  it.each([
    ['each header with its argument', { region: ['us-west1'], tenant: ['acme'], limit: ['42'], dry: ['false'] }, 'allow'],
    ['an integer written as a fraction (what keys on the text would read another value)', { limit: ['42.0'] }, 'header_mismatch'],
    ['an integer that differs', { limit: ['43'] }, 'header_mismatch'],
    ['a number header that is no number', { limit: ['0x2a'] }, 'header_mismatch'],
    ['a number with an exponent (a router reading it as text sees another value)', { limit: ['4.2e1'] }, 'header_mismatch'],
    ['an integer with leading zeros', { limit: ['042'] }, 'header_mismatch'],
    ['a value outside printable ASCII', { region: ['us-wést1'] }, 'header_mismatch'],
    ['a boolean in another case', { dry: ['False'] }, 'header_mismatch'],
    ['a region the body does not name', { region: ['eu-west1'] }, 'header_mismatch'],
    ['a nested argument that differs', { tenant: ['other'] }, 'header_mismatch'],
    ['a header the schema does not mark', { query: ['SELECT 1'] }, 'header_mismatch'],
    ['a header sent twice', { region: ['us-west1', 'us-west1'] }, 'header_mismatch'],
    ['a value in the Base64 sentinel', { region: [`=?base64?${Buffer.from('us-west1').toString('base64')}?=`] }, 'allow'],
  ])('%s', (_, params, expected) => {
    expect(codeOf(decideMirrors(facts(headers({ params })), [call('execute_sql', args)]))).toBe(expected);
  });

  it('a header for an argument the call leaves out, or sends as null', () => {
    expect(codeOf(decideMirrors(facts(headers({ params: { region: ['us-west1'] } })), [call('execute_sql', {})]))).toBe('header_mismatch');
    expect(codeOf(decideMirrors(facts(headers({ params: { region: ['null'] } })), [call('execute_sql', { region: null })]))).toBe('header_mismatch');
  });

  it('a tool whose schema the gateway has not seen cannot be checked: refused, telling the client to list the tools', () => {
    const decision = decideMirrors(facts(headers({ params: { region: ['us-west1'] } })), [call('unseen', { region: 'us-west1' })]);
    expect(decision).toMatchObject({ allow: false, code: 'header_mismatch' });
    expect(decision.allow ? '' : decision.detail).toMatch(/tools\/list/);
  });

  it('an integer past the safe range never agrees: the forwarded body could not hold it', () => {
    // As the body parses it: 9007199254740992, one less than the header says.
    const args = JSON.parse('{"limit": 9007199254740993}') as Record<string, unknown>;
    expect(codeOf(decideMirrors(facts(headers({ params: { limit: ['9007199254740993'] } })), [call('execute_sql', args)]))).toBe('header_mismatch');
  });

  it('mirror headers on a request without a message (GET, DELETE) are refused', () => {
    expect(codeOf(decideMirrors(facts(headers({ name: ['list_agents'] })), undefined))).toBe('header_mismatch');
    expect(codeOf(decideMirrors(facts(headers()), undefined))).toBe('allow');
  });

  it('a tool whose schema breaks the revision’s rules is refused as such', () => {
    const invalid: McpRequestFacts = { ...facts(headers({ params: { region: ['x'] } })), toolHeaders: { paramHeadersOf: () => 'invalid' } };
    const decision = decideMirrors(invalid, [call('execute_sql', { region: 'x' })]);
    expect(decision.allow ? '' : decision.detail).toMatch(/invalid x-mcp-header/);
  });

  it('Mcp-Param-* on anything but a tools/call', () => {
    expect(codeOf(decideMirrors(facts(headers({ params: { region: ['x'] } })), [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }]))).toBe('header_mismatch');
  });
});

describe('decodeMirrorValue: the revision’s Value Encoding', () => {
  it.each([
    ['us-west1', 'us-west1'],
    [`=?base64?${Buffer.from('Hello, 世界').toString('base64')}?=`, 'Hello, 世界'],
    [`=?base64?${Buffer.from('=?base64?literal?=').toString('base64')}?=`, '=?base64?literal?='],
    ['=?base64??=', ''],
    ['=?BASE64?dXM=?=', '=?BASE64?dXM=?='],
    ['=?base64?dXM?=', undefined],
  ])('%s', (value, expected) => {
    expect(decodeMirrorValue(value)).toBe(expected);
  });
});
