import { describe, expect, it } from 'vitest';
import type { Tables } from '../../../src/config/tables.ts';
import { ALLOW, decide } from '../../../src/policy/decide.ts';
import type { Decision, DecisionInput } from '../../../src/policy/decide.ts';
import type { Principal } from '../../../src/policy/principal.ts';
import type { Charge, Counted } from '../../../src/policy/rate-limits.ts';
import { NO_MCP_HEADERS, type McpHeaders, type ToolHeaderLookup } from '../../../src/policy/mcp-headers.ts';
import type { McpRequestFacts } from '../../../src/policy/mcp-request.ts';
import { compileRoutes } from '../../../src/policy/routes.ts';
import type { CompiledRoute } from '../../../src/policy/routes.ts';
import { ToolGrants } from '../../../src/policy/scopes.ts';
import { ALL_FEATURES, apiKey, defaultTables, defaultYaml, LEGACY_PATHS, NO_FEATURES, routesWith, tablesFrom } from './support.ts';

const NOW = new Date('2030-06-01T12:00:00.000Z');
const ADMIN: Principal = { kind: 'admin', adminId: 1, expiresAt: new Date(NOW.getTime() + 3_600_000), sessionId: 's-1', revoked: false };
const MCP_SCOPES = 'mcp:calls mcp:knowledge mcp:transcripts mcp:agents mcp:events mcp:recall mcp:custom_tools mcp:orchestrate';

/** What the test compares: allow, the charges to count, or the code, status and needed scope of the refusal. */
type Expected =
  | 'allow'
  | 'authenticate'
  | { count: string[] }
  | { code: string; status: number; scope?: string; messageIndex?: number; messageId?: string | number | null; retryAfter?: number; limit?: string };

function summary(decision: Decision): Expected {
  if (decision.allow === 'authenticate') return 'authenticate';
  // A charge as `key 10/60` or `tool place_outbound_call 10/60 ×2`.
  if (decision.allow === 'count') {
    return { count: decision.charges.map((c) => `${c.limit}${c.tool === undefined ? '' : ` ${c.tool}`} ${c.rule.requests}/${c.rule.perSeconds}${c.times > 1 ? ` ×${c.times}` : ''}`) };
  }
  if (decision.allow) return 'allow';
  const { code, status, scope, messageIndex, messageId, retryAfter, limit } = decision;
  return {
    code,
    status,
    ...(scope === undefined ? {} : { scope }),
    ...(messageIndex === undefined ? {} : { messageIndex }),
    ...('messageId' in decision ? { messageId } : {}),
    ...(retryAfter === undefined ? {} : { retryAfter }),
    ...(limit === undefined ? {} : { limit }),
  };
}

const refused = (code: string, status: number, scope?: string): Expected => (scope === undefined ? { code, status } : { code, status, scope });

function routeNamed(tables: Tables, name: string): CompiledRoute {
  const route = compileRoutes(tables).routes.find((r) => r.name === name);
  if (!route) throw new Error(`no route ${name}`);
  return route;
}

interface Case {
  description: string;
  route: string;
  params?: Record<string, number>;
  principal: Principal | null;
  features?: ReadonlySet<string>;
  messages?: readonly unknown[];
  /** MCP: the request's headers, decided at the exchange (after the credential) unless `exchange` is false. */
  mcp?: { headers: Partial<Omit<McpHeaders, 'params'>> & { params?: Record<string, string[]> }; exchange?: boolean; batch?: boolean };
  /** The limiter's answer, when the decision is asked again after counting. */
  counted?: Counted;
  expected: Expected;
}

/** The MCP policy of the cases: one allowed browser origin, one tool with a mirrored argument. */
const ALLOWED_ORIGINS: ReadonlySet<string> = new Set(['https://console.example']);
const TOOL_HEADERS: ToolHeaderLookup = { paramHeadersOf: (tool) => (tool === 'get_agent_status' ? [{ name: 'agent-id', path: ['agent_id'] }] : undefined) };

function mcpRequestOf(mcp: NonNullable<Case['mcp']>): McpRequestFacts {
  const headers: McpHeaders = { ...NO_MCP_HEADERS, ...mcp.headers, params: new Map(Object.entries(mcp.headers.params ?? {})) };
  return { headers, allowedOrigins: ALLOWED_ORIGINS, toolHeaders: TOOL_HEADERS, exchange: mcp.exchange ?? true, batch: mcp.batch ?? false };
}

function run(tables: Tables, cases: readonly Case[]) {
  it.each(cases)('$description', (c) => {
    const input: DecisionInput = {
      route: routeNamed(tables, c.route),
      params: c.params ?? {},
      credential: c.principal === null ? 'none' : c.principal.kind,
      principal: c.principal ?? undefined,
      licence: { features: c.features ?? ALL_FEATURES },
      now: NOW,
      ...(c.messages === undefined ? {} : { mcpMessages: c.messages }),
      ...(c.mcp === undefined ? {} : { mcpRequest: mcpRequestOf(c.mcp) }),
      ...(c.counted === undefined ? {} : { counted: c.counted }),
    };
    expect(summary(decide(input, tables))).toEqual(c.expected);
  });
}

const call = (name: unknown, args?: unknown, id: unknown = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: args === undefined ? { name } : { name, arguments: args },
});
const request = (method: string, id: unknown = 1) => ({ jsonrpc: '2.0', id, method });
const notification = (method: string) => ({ jsonrpc: '2.0', method });

const tables = defaultTables();
const EVENTS = { route: 'events', params: { agent_id: 7 } };

describe('decide: credentials', () => {
  run(tables, [
    { description: 'events without a credential: 401 missing_credential', ...EVENTS, principal: null, expected: refused('missing_credential', 401) },
    { description: 'MCP without a credential: 401 missing_credential', route: 'mcp', principal: null, expected: refused('missing_credential', 401) },
    { description: 'admin route without a credential: 401 missing_credential', route: 'admin', principal: null, expected: refused('missing_credential', 401) },
    { description: 'admin token on the events route: 401 wrong_credential_type', ...EVENTS, principal: ADMIN, expected: refused('wrong_credential_type', 401) },
    { description: 'admin token on MCP: 401 wrong_credential_type', route: 'mcp', principal: ADMIN, messages: [request('initialize')], expected: refused('wrong_credential_type', 401) },
    { description: 'admin token on the legacy SSE stream: 401 wrong_credential_type', route: 'mcp_sse', principal: ADMIN, expected: refused('wrong_credential_type', 401) },
    { description: 'API key on an admin route: 401 wrong_credential_type', route: 'admin', principal: apiKey(['events:write', 'mcp:tools']), expected: refused('wrong_credential_type', 401) },
    { description: 'admin token on an admin route: allowed', route: 'admin', principal: ADMIN, expected: 'allow' },
    { description: 'key that expires at this very instant is expired', ...EVENTS, principal: apiKey(['events:write'], { expiresAt: new Date(NOW.getTime()) }), expected: refused('expired_credential', 401) },
    { description: 'key that expired a millisecond ago', ...EVENTS, principal: apiKey(['events:write'], { expiresAt: new Date(NOW.getTime() - 1) }), expected: refused('expired_credential', 401) },
    { description: 'key that expires in a millisecond is valid', ...EVENTS, principal: apiKey(['events:write'], { expiresAt: new Date(NOW.getTime() + 1) }), expected: 'allow' },
    { description: 'key without expiry is valid', ...EVENTS, principal: apiKey(['events:write'], { expiresAt: null }), expected: 'allow' },
    { description: 'expiry is checked before scope', ...EVENTS, principal: apiKey(['mcp:calls'], { expiresAt: NOW }), expected: refused('expired_credential', 401) },
    { description: 'expired key on MCP', route: 'mcp', principal: apiKey(['mcp:calls'], { expiresAt: NOW }), messages: [request('initialize')], expected: refused('expired_credential', 401) },
    { description: 'expired key on an admin route is still the wrong type', route: 'admin', principal: apiKey(['events:write'], { expiresAt: NOW }), expected: refused('wrong_credential_type', 401) },
    { description: 'a revoked key: 401 revoked_credential', ...EVENTS, principal: apiKey(['events:write'], { revoked: true }), expected: refused('revoked_credential', 401) },
    { description: 'revocation is checked before expiry', ...EVENTS, principal: apiKey(['events:write'], { revoked: true, expiresAt: NOW }), expected: refused('revoked_credential', 401) },
    { description: 'a revoked key on MCP', route: 'mcp', principal: apiKey(['mcp:calls'], { revoked: true }), messages: [request('initialize')], expected: refused('revoked_credential', 401) },
    { description: 'a revoked key on an admin route is still the wrong type', route: 'admin', principal: apiKey(['events:write'], { revoked: true }), expected: refused('wrong_credential_type', 401) },
    { description: 'a disabled key: 401 disabled_credential', ...EVENTS, principal: apiKey(['events:write'], { disabled: true }), expected: refused('disabled_credential', 401) },
    { description: 'revocation is checked before disabling', ...EVENTS, principal: apiKey(['events:write'], { revoked: true, disabled: true }), expected: refused('revoked_credential', 401) },
    { description: 'expiry is checked before disabling, as the record’s status reads', ...EVENTS, principal: apiKey(['events:write'], { disabled: true, expiresAt: NOW }), expected: refused('expired_credential', 401) },
    { description: 'a disabled key on MCP', route: 'mcp', principal: apiKey(['mcp:calls'], { disabled: true }), messages: [request('initialize')], expected: refused('disabled_credential', 401) },
    { description: 'a disabled key on an admin route is still the wrong type', route: 'admin', principal: apiKey(['events:write'], { disabled: true }), expected: refused('wrong_credential_type', 401) },
    { description: 'an admin token at its exp: 401 expired_credential', route: 'admin', principal: { ...ADMIN, expiresAt: NOW }, expected: refused('expired_credential', 401) },
    { description: 'an admin token a millisecond before its exp', route: 'admin', principal: { ...ADMIN, expiresAt: new Date(NOW.getTime() + 1) }, expected: 'allow' },
    { description: 'an admin token whose session was ended: 401 revoked_credential', route: 'admin', principal: { ...ADMIN, revoked: true }, expected: refused('revoked_credential', 401) },
    { description: 'an ended session is revoked before it is expired', route: 'admin', principal: { ...ADMIN, revoked: true, expiresAt: NOW }, expected: refused('revoked_credential', 401) },
    { description: 'an ended session\'s token on the events route is still the wrong type', ...EVENTS, principal: { ...ADMIN, revoked: true }, expected: refused('wrong_credential_type', 401) },
  ]);
});

/** Asked before authentication: what the credential's shape alone settles, or `authenticate`. */
describe('decide: before authentication', () => {
  const withPublic = tablesFrom({ routes: routesWith({ name: 'health', path: '/health', methods: ['GET'], credential: 'none' }) });
  it.each([
    { description: 'no credential on an API-key route', route: 'events', credential: 'none', expected: refused('missing_credential', 401) },
    { description: 'a token of neither shape', route: 'events', credential: 'unknown', expected: refused('invalid_credential', 401) },
    { description: 'an API key on an admin route, unverified', route: 'admin', credential: 'api_key', expected: refused('wrong_credential_type', 401) },
    { description: 'an admin token on MCP, unverified', route: 'mcp', credential: 'admin', expected: refused('wrong_credential_type', 401) },
    { description: 'an API key on an API-key route: authenticate it', route: 'events', credential: 'api_key', expected: 'authenticate' },
    { description: 'an admin token on an admin route: authenticate it', route: 'admin', credential: 'admin', expected: 'authenticate' },
    { description: 'anything on a public route: allowed, nothing authenticated', route: 'health', credential: 'unknown', expected: 'allow' },
  ] as const)('$description', ({ route, credential, expected }) => {
    const input: DecisionInput = { route: routeNamed(withPublic, route), params: { agent_id: 7 }, credential, licence: { features: ALL_FEATURES }, now: NOW };
    expect(summary(decide(input, withPublic))).toEqual(expected);
  });
});

describe('decide: events route', () => {
  run(tables, [
    { description: 'events:write, unbound key: any agent', ...EVENTS, principal: apiKey(['events:write']), expected: 'allow' },
    { description: 'events:write, unbound key: another agent too', route: 'events', params: { agent_id: 123456 }, principal: apiKey(['events:write']), expected: 'allow' },
    { description: 'bound key, its own agent', ...EVENTS, principal: apiKey(['events:write'], { agentId: 7 }), expected: 'allow' },
    { description: 'bound key, another agent: 403 agent_mismatch', ...EVENTS, principal: apiKey(['events:write'], { agentId: 8 }), expected: refused('agent_mismatch', 403) },
    { description: 'no events:write: 403 insufficient_scope naming events:write', ...EVENTS, principal: apiKey(['mcp:calls', 'mcp:tools']), expected: refused('insufficient_scope', 403, 'events:write') },
    { description: 'no scopes at all', ...EVENTS, principal: apiKey([]), expected: refused('insufficient_scope', 403, 'events:write') },
    { description: 'mcp:events is not events:write', ...EVENTS, principal: apiKey(['mcp:events']), expected: refused('insufficient_scope', 403, 'events:write') },
    { description: 'scope is checked before the agent binding', ...EVENTS, principal: apiKey(['mcp:calls'], { agentId: 8 }), expected: refused('insufficient_scope', 403, 'events:write') },
    { description: 'an unknown granted scope grants nothing', ...EVENTS, principal: apiKey(['events:*', 'events:write:all']), expected: refused('insufficient_scope', 403, 'events:write') },
  ]);
});

describe('decide: MCP route gate (at least one mcp: scope)', () => {
  run(tables, [
    { description: 'GET stream with an MCP scope', route: 'mcp', principal: apiKey(['mcp:agents']), expected: 'allow' },
    { description: 'DELETE session with the legacy alias only', route: 'mcp', principal: apiKey(['mcp:tools']), expected: 'allow' },
    { description: 'events:write only: 403 insufficient_scope listing the MCP scopes', route: 'mcp', principal: apiKey(['events:write']), expected: refused('insufficient_scope', 403, MCP_SCOPES) },
    { description: 'no scopes: 403 insufficient_scope', route: 'mcp', principal: apiKey([]), messages: [request('initialize')], expected: refused('insufficient_scope', 403, MCP_SCOPES) },
    { description: 'a licensed scope whose feature is off still opens the MCP route', route: 'mcp', principal: apiKey(['mcp:events']), features: NO_FEATURES, messages: [request('initialize')], expected: 'allow' },
    { description: 'legacy SSE stream with an MCP scope', route: 'mcp_sse', principal: apiKey(['mcp:calls']), expected: 'allow' },
    { description: 'legacy SSE stream without one', route: 'mcp_sse', principal: apiKey(['events:write']), expected: refused('insufficient_scope', 403, MCP_SCOPES) },
    { description: 'legacy messages are inspected like MCP_PATH (allowed)', route: 'mcp_messages', principal: apiKey(['mcp:calls']), messages: [call('place_outbound_call')], expected: 'allow' },
    { description: 'legacy messages are inspected like MCP_PATH (refused)', route: 'mcp_messages', principal: apiKey(['mcp:calls']), messages: [call('list_agents')], expected: { code: 'insufficient_scope', status: 403, scope: 'mcp:agents', messageIndex: 0, messageId: 1 } },
    { description: 'an empty batch: 400', route: 'mcp', principal: apiKey(['mcp:calls']), messages: [], expected: refused('validation_failed', 400) },
  ]);
});

const TOOLS: readonly { tool: string; scope: string; feature?: string }[] = [
  { tool: 'place_outbound_call', scope: 'mcp:calls' },
  { tool: 'search_knowledge_base', scope: 'mcp:knowledge' },
  { tool: 'fetch_call_transcript', scope: 'mcp:transcripts' },
  { tool: 'list_agents', scope: 'mcp:agents' },
  { tool: 'get_agent_status', scope: 'mcp:agents' },
  { tool: 'record_event', scope: 'mcp:events', feature: 'events' },
  { tool: 'lookup_end_user', scope: 'mcp:recall', feature: 'recall' },
  { tool: 'call_custom_tool', scope: 'mcp:custom_tools', feature: 'custom_tools' },
  { tool: 'delegate_task_to_orchestrator', scope: 'mcp:orchestrate', feature: 'orchestrate' },
];
const ALL_MCP = [...new Set(TOOLS.map((t) => t.scope))];
/** What the legacy alias mcp:tools stands for. */
const LEGACY = ['mcp:calls', 'mcp:knowledge', 'mcp:transcripts'];

/** A refusal of the single message of a request (id 1). */
const refusedMessage = (code: string, status: number, scope?: string): Expected => ({ ...(refused(code, status, scope) as object), messageIndex: 0, messageId: 1 }) as Expected;

describe('decide: tools/call, each tool and its scope', () => {
  run(
    tables,
    TOOLS.flatMap(({ tool, scope }): Case[] => [
      { description: `${tool} with ${scope}`, route: 'mcp', principal: apiKey([scope]), messages: [call(tool)], expected: 'allow' },
      {
        description: `${tool} with every other MCP scope: 403 insufficient_scope naming ${scope}`,
        route: 'mcp',
        principal: apiKey([...ALL_MCP.filter((s) => s !== scope), ...(LEGACY.includes(scope) ? [] : ['mcp:tools']), 'events:write']),
        messages: [call(tool)],
        expected: refusedMessage('insufficient_scope', 403, scope),
      },
    ]),
  );
});

describe('decide: the legacy alias mcp:tools', () => {
  run(
    tables,
    TOOLS.map(({ tool, scope }): Case => ({
      description: `mcp:tools ${LEGACY.includes(scope) ? 'grants' : 'does not grant'} ${tool}`,
      route: 'mcp',
      principal: apiKey(['mcp:tools']),
      messages: [call(tool)],
      expected: LEGACY.includes(scope) ? 'allow' : refusedMessage('insufficient_scope', 403, scope),
    })),
  );
});

describe('decide: licensed features', () => {
  run(
    tables,
    TOOLS.filter((t) => t.feature !== undefined).flatMap(({ tool, scope, feature }): Case[] => [
      { description: `${tool}, feature ${feature} on`, route: 'mcp', principal: apiKey([scope]), features: new Set([feature!]), messages: [call(tool)], expected: 'allow' },
      { description: `${tool}, feature ${feature} off: 403 feature_not_licensed`, route: 'mcp', principal: apiKey([scope]), features: NO_FEATURES, messages: [call(tool)], expected: refusedMessage('feature_not_licensed', 403) },
      {
        description: `${tool}, every feature but ${feature}: 403 feature_not_licensed`,
        route: 'mcp',
        principal: apiKey(ALL_MCP),
        features: new Set([...ALL_FEATURES].filter((f) => f !== feature)),
        messages: [call(tool)],
        expected: refusedMessage('feature_not_licensed', 403),
      },
      { description: `${tool} without ${scope}, feature off: the scope is refused first`, route: 'mcp', principal: apiKey(['mcp:calls']), features: NO_FEATURES, messages: [call(tool)], expected: refusedMessage('insufficient_scope', 403, scope) },
    ]),
  );
  run(tables, [
    { description: 'unlicensed tools need no feature', route: 'mcp', principal: apiKey(['mcp:agents']), features: NO_FEATURES, messages: [call('list_agents')], expected: 'allow' },
  ]);
});

describe('decide: unknown tools and malformed calls', () => {
  const everything = apiKey([...ALL_MCP, 'mcp:tools']);
  run(tables, [
    { description: 'a tool not in the table: unknown_tool, as a tool server answers it', route: 'mcp', principal: everything, messages: [call('drop_database')], expected: refusedMessage('unknown_tool', 404) },
    { description: 'tool names are exact (case)', route: 'mcp', principal: everything, messages: [call('List_Agents')], expected: refusedMessage('unknown_tool', 404) },
    { description: '__proto__ is not a tool', route: 'mcp', principal: everything, messages: [call('__proto__')], expected: refusedMessage('unknown_tool', 404) },
    { description: 'constructor is not a tool', route: 'mcp', principal: everything, messages: [call('constructor')], expected: refusedMessage('unknown_tool', 404) },
    { description: 'a scope name is not a tool', route: 'mcp', principal: everything, messages: [call('mcp:calls')], expected: refusedMessage('unknown_tool', 404) },
    { description: 'params.name missing: 400', route: 'mcp', principal: everything, messages: [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} }], expected: refusedMessage('validation_failed', 400) },
    { description: 'params.name a number: 400', route: 'mcp', principal: everything, messages: [call(5)], expected: refusedMessage('validation_failed', 400) },
    { description: 'params.name an array: 400', route: 'mcp', principal: everything, messages: [call(['list_agents'])], expected: refusedMessage('validation_failed', 400) },
    { description: 'params missing: 400', route: 'mcp', principal: everything, messages: [request('tools/call')], expected: refusedMessage('validation_failed', 400) },
    { description: 'params an array: 400', route: 'mcp', principal: everything, messages: [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: ['list_agents'] }], expected: refusedMessage('validation_failed', 400) },
    { description: 'arguments an array: 400', route: 'mcp', principal: everything, messages: [call('list_agents', [1])], expected: refusedMessage('validation_failed', 400) },
    { description: 'arguments null: 400', route: 'mcp', principal: everything, messages: [call('list_agents', null)], expected: refusedMessage('validation_failed', 400) },
    { description: 'arguments a string: 400', route: 'mcp', principal: everything, messages: [call('list_agents', '{"agent_id":1}')], expected: refusedMessage('validation_failed', 400) },
    { description: 'a non-object message (null): 400', route: 'mcp', principal: everything, messages: [null], expected: { code: 'validation_failed', status: 400, messageIndex: 0 } },
    { description: 'a non-object message (number): 400', route: 'mcp', principal: everything, messages: [42], expected: { code: 'validation_failed', status: 400, messageIndex: 0 } },
    { description: 'a non-object message (nested batch): 400', route: 'mcp', principal: everything, messages: [[call('list_agents')]], expected: { code: 'validation_failed', status: 400, messageIndex: 0 } },
    { description: 'a non-string method: 400', route: 'mcp', principal: everything, messages: [{ jsonrpc: '2.0', id: 1, method: 7 }], expected: refusedMessage('validation_failed', 400) },
  ]);
});

describe('decide: agent binding in tools/call arguments.agent_id', () => {
  const bound = apiKey(['mcp:agents'], { agentId: 7 });
  const unbound = apiKey(['mcp:agents']);
  const mismatch = refusedMessage('agent_mismatch', 403);
  run(tables, [
    { description: 'bound key, agent_id its own (number)', route: 'mcp', principal: bound, messages: [call('get_agent_status', { agent_id: 7 })], expected: 'allow' },
    { description: 'bound key, agent_id its own (canonical string)', route: 'mcp', principal: bound, messages: [call('get_agent_status', { agent_id: '7' })], expected: 'allow' },
    { description: 'bound key, no agent_id', route: 'mcp', principal: bound, messages: [call('list_agents', {})], expected: 'allow' },
    { description: 'bound key, no arguments', route: 'mcp', principal: bound, messages: [call('list_agents')], expected: 'allow' },
    { description: 'bound key, another agent (number): 403', route: 'mcp', principal: bound, messages: [call('get_agent_status', { agent_id: 8 })], expected: mismatch },
    { description: 'bound key, another agent (string): 403', route: 'mcp', principal: bound, messages: [call('get_agent_status', { agent_id: '8' })], expected: mismatch },
    ...['07', '+7', '7.0', ' 7', '7 ', '7e0', '0x7', '', 'seven'].map(
      (value): Case => ({ description: `bound key, agent_id ${JSON.stringify(value)}: 403`, route: 'mcp', principal: bound, messages: [call('get_agent_status', { agent_id: value })], expected: mismatch }),
    ),
    ...[7.5, -7, 0, Number.NaN, null, true, {}, [7], { value: 7 }].map(
      (value): Case => ({ description: `bound key, agent_id ${JSON.stringify(value)}: 403`, route: 'mcp', principal: bound, messages: [call('get_agent_status', { agent_id: value })], expected: mismatch }),
    ),
    { description: 'unbound key, any agent_id', route: 'mcp', principal: unbound, messages: [call('get_agent_status', { agent_id: 8 })], expected: 'allow' },
    { description: 'unbound key, agent_id not even a number', route: 'mcp', principal: unbound, messages: [call('get_agent_status', { agent_id: 'abc' })], expected: 'allow' },
    { description: 'scope is checked before the binding', route: 'mcp', principal: apiKey(['mcp:calls'], { agentId: 7 }), messages: [call('get_agent_status', { agent_id: 8 })], expected: refusedMessage('insufficient_scope', 403, 'mcp:agents') },
  ]);
});

describe('decide: other JSON-RPC methods (default table)', () => {
  const key = apiKey(['mcp:calls']);
  run(tables, [
    ...['initialize', 'ping', 'tools/list'].map((method): Case => ({ description: `${method} with any MCP scope`, route: 'mcp', principal: key, messages: [request(method)], expected: 'allow' })),
    ...['notifications/initialized', 'notifications/cancelled', 'notifications/roots/list_changed'].map(
      (method): Case => ({ description: `${method} (prefix notifications/*)`, route: 'mcp', principal: key, messages: [notification(method)], expected: 'allow' }),
    ),
    ...['resources/list', 'resources/read', 'prompts/list', 'prompts/get', 'completion/complete', 'logging/setLevel', 'sampling/createMessage', 'tools/lis', 'tools/list/x', 'notifications', 'notifications/', 'Initialize', ''].map(
      (method): Case => ({ description: `${JSON.stringify(method)} is not listed: method_not_found`, route: 'mcp', principal: key, messages: [request(method)], expected: refusedMessage('method_not_found', 404) }),
    ),
    { description: 'a response to a server request (result)', route: 'mcp', principal: key, messages: [{ jsonrpc: '2.0', id: 'srv-1', result: {} }], expected: 'allow' },
    { description: 'a response to a server request (error)', route: 'mcp', principal: key, messages: [{ jsonrpc: '2.0', id: 'srv-1', error: { code: -1, message: 'no' } }], expected: 'allow' },
    { description: 'neither method nor result nor error: 400', route: 'mcp', principal: key, messages: [{ jsonrpc: '2.0', id: 1 }], expected: refusedMessage('validation_failed', 400) },
  ]);
});

describe('decide: operator methods table', () => {
  const { tools } = defaultYaml();
  const operatorTables = tablesFrom({
    tools: {
      ...tools,
      methods: { ...(tools.methods as object), 'resources/list': 'any_mcp', 'prompts/get': 'mcp:knowledge', 'notifications/message': 'deny', 'recall/*': 'mcp:recall' },
      responses: 'deny',
    },
  });
  run(operatorTables, [
    { description: 'an operator-opened method (any_mcp)', route: 'mcp', principal: apiKey(['mcp:calls']), messages: [request('resources/list')], expected: 'allow' },
    { description: 'an operator method needing a scope, held', route: 'mcp', principal: apiKey(['mcp:knowledge']), messages: [request('prompts/get')], expected: 'allow' },
    { description: 'an operator method needing a scope, held through the alias', route: 'mcp', principal: apiKey(['mcp:tools']), messages: [request('prompts/get')], expected: 'allow' },
    { description: 'an operator method needing a scope, missing', route: 'mcp', principal: apiKey(['mcp:calls']), messages: [request('prompts/get')], expected: refusedMessage('insufficient_scope', 403, 'mcp:knowledge') },
    { description: 'an operator method needing a licensed scope, feature off', route: 'mcp', principal: apiKey(['mcp:recall']), features: NO_FEATURES, messages: [request('recall/search')], expected: refusedMessage('feature_not_licensed', 403) },
    { description: 'an exact deny beats the notifications/* prefix', route: 'mcp', principal: apiKey(['mcp:calls']), messages: [notification('notifications/message')], expected: { code: 'method_not_found', status: 404, messageIndex: 0 } },
    { description: 'the prefix still applies to other notifications', route: 'mcp', principal: apiKey(['mcp:calls']), messages: [notification('notifications/initialized')], expected: 'allow' },
    { description: 'responses denied by the operator', route: 'mcp', principal: apiKey(['mcp:calls']), messages: [{ jsonrpc: '2.0', id: 3, result: {} }], expected: { code: 'method_not_allowed_for_key', status: 403, messageIndex: 0, messageId: 3 } },
  ]);
});

describe('decide: batches', () => {
  const key = apiKey(['mcp:calls', 'mcp:agents'], { agentId: 7 });
  run(tables, [
    {
      description: 'every message allowed: allowed',
      route: 'mcp',
      principal: key,
      messages: [request('initialize', 'a'), notification('notifications/initialized'), call('place_outbound_call', { agent_id: 7 }, 'b'), call('list_agents', undefined, 'c')],
      expected: 'allow',
    },
    {
      description: 'one message lacks its scope: the batch is refused, naming that message',
      route: 'mcp',
      principal: key,
      messages: [request('tools/list', 'a'), call('place_outbound_call', {}, 'b'), call('search_knowledge_base', {}, 'c'), call('nope', {}, 'd')],
      expected: { code: 'insufficient_scope', status: 403, scope: 'mcp:knowledge', messageIndex: 2, messageId: 'c' },
    },
    {
      description: 'the first refusal wins (unknown tool before a later scope refusal)',
      route: 'mcp',
      principal: key,
      messages: [call('list_agents', {}, 1), call('nope', {}, 2), call('search_knowledge_base', {}, 3)],
      expected: { code: 'unknown_tool', status: 404, messageIndex: 1, messageId: 2 },
    },
    {
      description: 'agent mismatch inside a batch',
      route: 'mcp',
      principal: key,
      messages: [call('get_agent_status', { agent_id: 7 }, 10), call('get_agent_status', { agent_id: 9 }, 11)],
      expected: { code: 'agent_mismatch', status: 403, messageIndex: 1, messageId: 11 },
    },
    {
      description: 'a refused notification has no id',
      route: 'mcp',
      principal: key,
      messages: [request('ping', 1), notification('resources/updated')],
      expected: { code: 'method_not_found', status: 404, messageIndex: 1 },
    },
    {
      description: 'an id of an invalid type is reported as null',
      route: 'mcp',
      principal: key,
      messages: [call('nope', {}, { x: 1 })],
      expected: { code: 'unknown_tool', status: 404, messageIndex: 0, messageId: null },
    },
    {
      description: 'a null id is reported as null',
      route: 'mcp',
      principal: key,
      messages: [call('nope', {}, null)],
      expected: { code: 'unknown_tool', status: 404, messageIndex: 0, messageId: null },
    },
    {
      description: 'a malformed element fails the batch with 400',
      route: 'mcp',
      principal: key,
      messages: [request('ping', 1), 'garbage'],
      expected: { code: 'validation_failed', status: 400, messageIndex: 1 },
    },
  ]);
});

describe('decide: the MCP request headers (docs/mcp.md, "Protocol revisions")', () => {
  const agents = apiKey(['mcp:agents']);
  const modern = { protocolVersion: ['2026-07-28'] };
  const tables = defaultTables();
  run(tables, [
    { description: 'an Origin not listed, before any credential', route: 'mcp', principal: null, mcp: { headers: { origin: ['https://evil.example'] }, exchange: false }, expected: refused('origin_not_allowed', 403) },
    { description: 'a listed Origin goes on to the credential', route: 'mcp', principal: null, mcp: { headers: { origin: ['https://console.example'] }, exchange: false }, expected: refused('missing_credential', 401) },
    { description: 'two Origin headers', route: 'mcp', principal: null, mcp: { headers: { origin: ['https://console.example', 'https://console.example'] }, exchange: false }, expected: refused('origin_not_allowed', 403) },
    { description: 'a revision that is none: decided at the exchange', route: 'mcp', principal: agents, mcp: { headers: { protocolVersion: ['1999-01-01'] } }, expected: refused('unsupported_protocol_version', 400) },
    { description: 'a revision that is none: not yet when the credential is decided', route: 'mcp', principal: agents, mcp: { headers: { protocolVersion: ['1999-01-01'] }, exchange: false }, expected: 'allow' },
    { description: 'a batch with no MCP-Protocol-Version (2025-03-26 and before): decided message by message', route: 'mcp', principal: agents, messages: [request('ping', 1), request('ping', 2)], mcp: { headers: {}, batch: true }, expected: 'allow' },
    { description: 'a batch under 2025-03-26: decided message by message', route: 'mcp', principal: agents, messages: [request('ping', 1), request('ping', 2)], mcp: { headers: { protocolVersion: ['2025-03-26'] }, batch: true }, expected: 'allow' },
    { description: 'a batch under 2025-06-18 (no batches): 400 invalid request', route: 'mcp', principal: agents, messages: [request('ping', 1), request('ping', 2)], mcp: { headers: { protocolVersion: ['2025-06-18'] }, batch: true }, expected: refused('validation_failed', 400) },
    { description: 'a batch under 2025-11-25: 400', route: 'mcp', principal: agents, messages: [request('ping', 1)], mcp: { headers: { protocolVersion: ['2025-11-25'] }, batch: true }, expected: refused('validation_failed', 400) },
    { description: 'a batch under 2026-07-28: 400, before its messages are looked at', route: 'mcp', principal: agents, messages: [call('drop_database', {})], mcp: { headers: modern, batch: true }, expected: refused('validation_failed', 400) },
    { description: 'a batch of a limited key under 2025-06-18: refused before anything is counted', route: 'mcp', principal: apiKey(['mcp:agents'], { rateLimit: { requests: 5, perSeconds: 1 } }), messages: [request('ping', 1)], mcp: { headers: { protocolVersion: ['2025-06-18'] }, batch: true }, expected: refused('validation_failed', 400) },
    { description: 'a single message under 2025-06-18 is no batch', route: 'mcp', principal: agents, messages: [request('ping', 1)], mcp: { headers: { protocolVersion: ['2025-06-18'] } }, expected: 'allow' },
    { description: 'a batch under a revision that is none: the version is told first', route: 'mcp', principal: agents, messages: [request('ping', 1)], mcp: { headers: { protocolVersion: ['2099-01-01'] }, batch: true }, expected: refused('unsupported_protocol_version', 400) },
    { description: 'server/discover: any mcp: scope connects', route: 'mcp', principal: agents, messages: [request('server/discover')], mcp: { headers: { ...modern, method: ['server/discover'] } }, expected: 'allow' },
    { description: 'Mcp-Name and Mcp-Method that agree', route: 'mcp', principal: agents, messages: [call('list_agents', {})], mcp: { headers: { ...modern, method: ['tools/call'], name: ['list_agents'] } }, expected: 'allow' },
    { description: 'Mcp-Name of a tool the key may not call', route: 'mcp', principal: agents, messages: [call('list_agents', {})], mcp: { headers: { name: ['place_outbound_call'] } }, expected: refused('header_mismatch', 400) },
    { description: 'Mcp-Name twice', route: 'mcp', principal: agents, messages: [call('list_agents', {})], mcp: { headers: { name: ['list_agents', 'list_agents'] } }, expected: refused('header_mismatch', 400) },
    { description: 'mirror headers on a request without a message (GET)', route: 'mcp', principal: agents, mcp: { headers: { name: ['list_agents'] } }, expected: refused('header_mismatch', 400) },
    { description: 'Mcp-Param-Agent-Id that agrees with the argument', route: 'mcp', principal: agents, messages: [call('get_agent_status', { agent_id: 2 })], mcp: { headers: { params: { 'agent-id': ['2'] } } }, expected: 'allow' },
    { description: 'Mcp-Param-Agent-Id naming another agent', route: 'mcp', principal: agents, messages: [call('get_agent_status', { agent_id: 2 })], mcp: { headers: { params: { 'agent-id': ['3'] } } }, expected: refused('header_mismatch', 400) },
    { description: 'Mcp-Param-* of a tool whose schema is unseen', route: 'mcp', principal: agents, messages: [call('list_agents', {})], mcp: { headers: { params: { 'agent-id': ['2'] } } }, expected: refused('header_mismatch', 400) },
    {
      description: 'the message first: an unknown tool is told so, whatever its headers say',
      route: 'mcp',
      principal: agents,
      messages: [call('drop_database', {})],
      mcp: { headers: { name: ['list_agents'] } },
      expected: { code: 'unknown_tool', status: 404, messageIndex: 0, messageId: 1 },
    },
    {
      description: 'the message first: a call a scope would allow keeps its 403 and scope',
      route: 'mcp',
      principal: agents,
      messages: [call('place_outbound_call', { to: '+15550100' })],
      mcp: { headers: { params: { 'agent-id': ['2'] } } },
      expected: { code: 'insufficient_scope', status: 403, scope: 'mcp:calls', messageIndex: 0, messageId: 1 },
    },
  ]);
});

describe('decide: public routes from an operator table', () => {
  const publicTables = tablesFrom({ routes: routesWith({ name: 'assets', path: '/assets/**', methods: ['GET', 'HEAD'], credential: 'none' }) });
  run(publicTables, [
    { description: 'no credential', route: 'assets', principal: null, expected: 'allow' },
    { description: 'an API key is not needed, and not refused', route: 'assets', principal: apiKey([]), expected: 'allow' },
    { description: 'an admin token', route: 'assets', principal: ADMIN, expected: 'allow' },
    { description: 'even an expired key (no credential is checked)', route: 'assets', principal: apiKey([], { expiresAt: NOW }), expected: 'allow' },
  ]);
});

describe('decide: an operator route requiring a licensed MCP scope', () => {
  const licensedRoute = tablesFrom({
    routes: routesWith({ name: 'recall_api', path: '/api/v1/agents/{agent_id}/recall', methods: ['GET'], credential: 'api_key', scope: 'mcp:recall', agent_param: 'agent_id' }),
  });
  run(licensedRoute, [
    { description: 'scope held, feature on', route: 'recall_api', params: { agent_id: 7 }, principal: apiKey(['mcp:recall']), expected: 'allow' },
    { description: 'scope held, feature off', route: 'recall_api', params: { agent_id: 7 }, principal: apiKey(['mcp:recall']), features: NO_FEATURES, expected: refused('feature_not_licensed', 403) },
    { description: 'scope missing', route: 'recall_api', params: { agent_id: 7 }, principal: apiKey(['mcp:calls']), expected: refused('insufficient_scope', 403, 'mcp:recall') },
    { description: 'bound to another agent', route: 'recall_api', params: { agent_id: 7 }, principal: apiKey(['mcp:recall'], { agentId: 1 }), expected: refused('agent_mismatch', 403) },
  ]);
});

describe('decide: values', () => {
  it('allows with the one shared ALLOW value (no allocation on the allow path)', () => {
    const input: DecisionInput = { route: routeNamed(tables, 'events'), params: { agent_id: 7 }, credential: 'api_key', principal: apiKey(['events:write'], { agentId: 7 }), licence: { features: NO_FEATURES }, now: NOW };
    expect(decide(input, tables)).toBe(ALLOW);
  });

  it('a refusal carries a detail', () => {
    const decision = decide({ route: routeNamed(tables, 'events'), params: { agent_id: 7 }, credential: 'none', licence: { features: NO_FEATURES }, now: NOW }, tables);
    expect(decision.allow).toBe(false);
    if (!decision.allow) expect(decision.detail).toEqual(expect.any(String));
  });
});

describe('decide: rate limits, the last rule (docs/api-keys.md, "Rate limits")', () => {
  const { tools } = defaultYaml();
  const limited = tablesFrom({ tools: { ...tools, limits: { place_outbound_call: { requests: 10, per_seconds: 60 }, list_agents: { requests: 100, per_seconds: 1 } } } }, LEGACY_PATHS);
  const own = { requests: 5, perSeconds: 1 };
  const caller = apiKey(['events:write', 'mcp:calls', 'mcp:agents'], { rateLimit: own });
  const unlimited = apiKey(['events:write', 'mcp:calls', 'mcp:agents']);
  const exchange = { headers: {} };
  const keyCharge: Charge = { limit: 'key', keyId: 1, tool: undefined, rule: own, times: 1 };
  const toolCharge: Charge = { limit: 'tool', keyId: 1, tool: 'place_outbound_call', rule: { requests: 10, perSeconds: 60 }, times: 1 };
  const admitted = (charges: Charge[]): Counted => ({ admitted: true, quotas: charges.map((charge) => ({ charge, remaining: 1, resetSeconds: 1 })) });
  const refusedBy = (charge: Charge, retryAfter: number): Counted => ({ admitted: false, refused: charge, retryAfter, quotas: [{ charge, remaining: 0, resetSeconds: retryAfter }] });
  run(limited, [
    { description: 'a key without a limit, no limited tool: allowed, nothing counted', ...EVENTS, principal: unlimited, expected: 'allow' },
    { description: 'a key with a limit: its request is counted', ...EVENTS, principal: caller, expected: { count: ['key 5/1'] } },
    { description: 'counted and admitted: allowed', ...EVENTS, principal: caller, counted: admitted([keyCharge]), expected: 'allow' },
    { description: 'counted and refused: 429 rate_limited with the seconds to wait', ...EVENTS, principal: caller, counted: refusedBy(keyCharge, 1), expected: { code: 'rate_limited', status: 429, retryAfter: 1 } },
    { description: 'a request refused by another rule is never counted (scope)', ...EVENTS, principal: apiKey(['mcp:calls'], { rateLimit: own }), expected: refused('insufficient_scope', 403, 'events:write') },
    { description: 'a request refused by another rule is never counted (binding)', ...EVENTS, principal: apiKey(['events:write'], { agentId: 8, rateLimit: own }), expected: refused('agent_mismatch', 403) },
    { description: 'a disabled key is refused, not counted', ...EVENTS, principal: apiKey(['events:write'], { disabled: true, rateLimit: own }), expected: refused('disabled_credential', 401) },
    { description: 'MCP: not counted when the credential is decided, before the body', route: 'mcp', principal: caller, mcp: { headers: {}, exchange: false }, expected: 'allow' },
    { description: 'MCP: a GET at its exchange counts the key\'s own limit', route: 'mcp', principal: caller, mcp: exchange, expected: { count: ['key 5/1'] } },
    { description: 'MCP: a limited tool is counted for the key, on top of its own limit', route: 'mcp', principal: caller, messages: [call('place_outbound_call')], mcp: exchange, expected: { count: ['key 5/1', 'tool place_outbound_call 10/60'] } },
    { description: 'MCP: a limited tool counts for a key without a limit of its own', route: 'mcp', principal: unlimited, messages: [call('place_outbound_call')], mcp: exchange, expected: { count: ['tool place_outbound_call 10/60'] } },
    { description: 'MCP: a tool without a limit counts only the key', route: 'mcp', principal: caller, messages: [call('get_agent_status')], mcp: exchange, expected: { count: ['key 5/1'] } },
    { description: 'MCP: a method other than tools/call counts only the key', route: 'mcp', principal: unlimited, messages: [request('tools/list')], mcp: exchange, expected: 'allow' },
    {
      description: 'MCP: a batch counts the key once per message and each limited call',
      route: 'mcp',
      principal: caller,
      messages: [call('place_outbound_call', {}, 1), call('list_agents', {}, 2), call('place_outbound_call', {}, 3), request('ping', 4)],
      mcp: { headers: {}, batch: true },
      expected: { count: ['key 5/1 ×4', 'tool place_outbound_call 10/60 ×2', 'tool list_agents 100/1'] },
    },
    {
      description: 'MCP: a batch of notifications and responses counts each of them against the key',
      route: 'mcp',
      principal: caller,
      messages: [notification('notifications/initialized'), { jsonrpc: '2.0', id: 9, result: {} }, request('ping', 4)],
      mcp: { headers: {}, batch: true },
      expected: { count: ['key 5/1 ×3'] },
    },
    { description: 'MCP: a batch as large as the key\'s whole limit is counted', route: 'mcp', principal: caller, messages: Array.from({ length: 5 }, (_, i) => request('ping', i + 1)), mcp: { headers: {}, batch: true }, expected: { count: ['key 5/1 ×5'] } },
    {
      description: 'MCP: a batch of more messages than the key\'s whole limit: 429 at once, nothing counted, naming no message',
      route: 'mcp',
      principal: caller,
      messages: Array.from({ length: 6 }, (_, i) => request('ping', i + 1)),
      mcp: { headers: {}, batch: true },
      expected: { code: 'rate_limited', status: 429, retryAfter: 1, limit: 'key' },
    },
    {
      description: 'MCP: a batch refused by the key\'s limit once counted (more than is left): refused whole',
      route: 'mcp',
      principal: caller,
      messages: [request('ping', 1), call('place_outbound_call', {}, 2)],
      mcp: { headers: {}, batch: true },
      counted: refusedBy({ ...keyCharge, times: 2 }, 1),
      expected: { code: 'rate_limited', status: 429, retryAfter: 1 },
    },
    { description: 'MCP: a batch with a refused message is refused, nothing counted', route: 'mcp', principal: caller, messages: [call('place_outbound_call', {}, 1), call('search_knowledge_base', {}, 2)], mcp: exchange, expected: { ...(refused('insufficient_scope', 403, 'mcp:knowledge') as object), messageIndex: 1, messageId: 2 } as Expected },
    { description: 'MCP: an unknown tool is answered as a server would, not counted', route: 'mcp', principal: caller, messages: [call('nope')], mcp: exchange, expected: refusedMessage('unknown_tool', 404) },
    { description: 'MCP: the tool\'s limit refuses, naming its first call', route: 'mcp', principal: caller, messages: [call('list_agents', {}, 'a'), call('place_outbound_call', {}, 'b')], mcp: exchange, counted: refusedBy(toolCharge, 42), expected: { code: 'rate_limited', status: 429, retryAfter: 42, messageIndex: 1, messageId: 'b' } },
    { description: 'MCP: the key\'s limit refuses the whole body', route: 'mcp', principal: caller, messages: [call('place_outbound_call', {}, 'b')], mcp: exchange, counted: refusedBy(keyCharge, 1), expected: { code: 'rate_limited', status: 429, retryAfter: 1 } },
    {
      description: 'MCP: a batch calling a tool more often than its limit ever allows: 429 at once, nothing counted',
      route: 'mcp',
      principal: unlimited,
      messages: Array.from({ length: 11 }, (_, i) => call('place_outbound_call', {}, i + 1)),
      mcp: { headers: {}, batch: true },
      expected: { code: 'rate_limited', status: 429, retryAfter: 60, messageIndex: 0, messageId: 1, limit: 'tool' },
    },
    { description: 'MCP: a batch calling a tool as often as its limit allows is counted (a key without a limit counts no message)', route: 'mcp', principal: unlimited, messages: Array.from({ length: 10 }, (_, i) => call('place_outbound_call', {}, i + 1)), mcp: { headers: {}, batch: true }, expected: { count: ['tool place_outbound_call 10/60 ×10'] } },
    { description: 'MCP: counted and admitted', route: 'mcp', principal: caller, messages: [call('place_outbound_call')], mcp: exchange, counted: admitted([keyCharge, toolCharge]), expected: 'allow' },
    { description: 'an admin token is never counted', route: 'admin', principal: ADMIN, expected: 'allow' },
  ]);

  it('a limit for a tool the table does not list stops the start, naming it', () => {
    expect(() => tablesFrom({ tools: { ...tools, limits: { place_outbound_cal: { requests: 10, per_seconds: 60 } } } })).toThrow(/limits\.place_outbound_cal: "place_outbound_cal" is not a tool of this table/);
  });

  it.each([
    [{ requests: 0, per_seconds: 60 }, /limits\.place_outbound_call\.requests/],
    [{ requests: 1_000_001, per_seconds: 60 }, /limits\.place_outbound_call\.requests/],
    [{ requests: 10, per_seconds: 86_401 }, /limits\.place_outbound_call\.per_seconds/],
    [{ requests: 1.5, per_seconds: 60 }, /must be an integer/],
    [{ requests: '10', per_seconds: 60 }, /limits\.place_outbound_call\.requests/],
    [{ requests: 10, per_seconds: 60, burst: 5 }, /unknown field \(burst\)/],
    [{ requests: 10 }, /per_seconds/],
  ])('a limit outside the API\'s bounds stops the start: %j', (limit, message) => {
    expect(() => tablesFrom({ tools: { ...tools, limits: { place_outbound_call: limit } } })).toThrow(message);
  });
});

describe('allowedTools and effectiveScopes', () => {
  it.each([
    { description: 'the legacy alias', scopes: ['mcp:tools'], features: ALL_FEATURES, tools: ['place_outbound_call', 'search_knowledge_base', 'fetch_call_transcript'] },
    { description: 'mcp:agents', scopes: ['mcp:agents', 'events:write'], features: NO_FEATURES, tools: ['list_agents', 'get_agent_status'] },
    { description: 'a licensed scope with its feature off', scopes: ['mcp:events'], features: NO_FEATURES, tools: [] },
    { description: 'a licensed scope with its feature on', scopes: ['mcp:events'], features: new Set(['events']), tools: ['record_event'] },
    { description: 'every scope, every feature', scopes: [...ALL_MCP], features: ALL_FEATURES, tools: TOOLS.map((t) => t.tool) },
    { description: 'every scope, no feature', scopes: [...ALL_MCP], features: NO_FEATURES, tools: TOOLS.filter((t) => !t.feature).map((t) => t.tool) },
    { description: 'no MCP scope', scopes: ['events:write'], features: ALL_FEATURES, tools: [] },
  ])('$description', ({ scopes, features, tools }) => {
    expect([...new ToolGrants(tables).allowedTools(apiKey(scopes), { features })].sort()).toEqual([...tools].sort());
  });

  it('admins call no tools', () => {
    expect(new ToolGrants(tables).allowedTools(ADMIN, { features: ALL_FEATURES }).size).toBe(0);
  });

  it('follows a change of licence for the same key state', () => {
    const key = apiKey(['mcp:events']);
    const grants = new ToolGrants(tables);
    expect([...grants.allowedTools(key, { features: NO_FEATURES })]).toEqual([]);
    expect([...grants.allowedTools(key, { features: ALL_FEATURES })]).toEqual(['record_event']);
  });

  it('effectiveScopes expands aliases and keeps what was granted', () => {
    expect([...new ToolGrants(tables).effectiveScopes(['events:write', 'mcp:tools'])].sort()).toEqual(['events:write', 'mcp:calls', 'mcp:knowledge', 'mcp:tools', 'mcp:transcripts']);
  });

  it('effectiveScopes is memoised per granted array', () => {
    const granted = ['mcp:tools'];
    const grants = new ToolGrants(tables);
    expect(grants.effectiveScopes(granted)).toBe(grants.effectiveScopes(granted));
  });
});
