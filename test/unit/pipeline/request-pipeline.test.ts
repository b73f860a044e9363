import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { generateKey } from '../../../src/credentials/key-format.ts';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import type { Authenticable, Authentication } from '../../../src/pipeline/authenticate.ts';
import { RequestPipeline, type ObservedDecision, type Verdict } from '../../../src/pipeline/request-pipeline.ts';
import { deny } from '../../../src/policy/denial.ts';
import type { AdminPrincipal, ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import { compileRoutes } from '../../../src/policy/routes.ts';
import { ALL_FEATURES, apiKey, defaultTables, defaultYaml, tablesFrom } from '../policy/support.ts';
import { LocalRateLimiter, type RateLimiter } from '../../../src/limits/rate-limiter.ts';
import type { Tables } from '../../../src/config/tables.ts';
import type { Charge } from '../../../src/policy/rate-limits.ts';

const NOW = new Date('2030-06-01T12:00:00.000Z');
const KEY = generateKey();
const TOKEN = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl';
const ADMIN: AdminPrincipal = { kind: 'admin', adminId: 1, expiresAt: new Date(NOW.getTime() + 60_000), sessionId: 's-1', revoked: false };

/** A stand-in for the verifiers: what each credential proves, and how (at once or after I/O). */
class StubAuthenticator {
  calls: Authenticable[] = [];
  answer: (credential: Authenticable) => Authentication = (credential) => (credential.kind === 'jwt' ? ADMIN : apiKey(['events:write'], { agentId: 7 }));

  readonly authenticate = (credential: Authenticable): Authentication => {
    this.calls.push(credential);
    return this.answer(credential);
  };
}

function setup(options: { tables?: Tables; limiter?: RateLimiter } = {}) {
  const tables = options.tables ?? defaultTables();
  const authenticator = new StubAuthenticator();
  const uses: number[] = [];
  const observed: ObservedDecision[] = [];
  /** The rate limits' clock, in milliseconds, stepped by a test. */
  const clock = { ms: 0 };
  const limited: string[] = [];
  const pipeline = new RequestPipeline({
    routes: compileRoutes(tables),
    tables,
    authenticator,
    licence: { features: ALL_FEATURES },
    now: () => NOW,
    limiter: options.limiter ?? new LocalRateLimiter({ now: () => clock.ms }),
    usage: { record: (keyId) => void uses.push(keyId) },
    observe: (decision) => void observed.push(decision),
    rateLimited: (limit) => void limited.push(limit),
  });
  return { pipeline, authenticator, uses, observed, clock, limited };
}

function request(method: string, authorization?: string | string[], raw: string[] = []): IncomingMessage {
  const headers = authorization === undefined ? {} : { authorization };
  const rawHeaders = [...(authorization === undefined ? [] : [authorization].flat().flatMap((value) => ['Authorization', value])), ...raw];
  return { method, headers, rawHeaders, socket: { remoteAddress: '127.0.0.9' } } as unknown as IncomingMessage;
}

const EVENTS = '/api/v1/agents/7/events';

/** The code of a refusal, or `allow`. */
function outcome(verdict: Verdict): string {
  return verdict.allow ? 'allow' : verdict.code;
}

describe('RequestPipeline: the route comes first', () => {
  it.each([
    ['a method the gateway does not forward', 'PROPFIND', EVENTS, 'not_found'],
    ['a method the MCP route does not list', 'PUT', '/mcp', 'method_not_allowed'],
    ['a bad agent id', 'POST', '/api/v1/agents/07/events', 'validation_failed'],
  ])('%s: %s %s is %s, and no credential is authenticated', (_what, method, path, code) => {
    const { pipeline, authenticator, observed } = setup();
    const verdict = pipeline.authorize(request(method, `Bearer ${KEY}`), path) as Verdict;
    expect(outcome(verdict)).toBe(code);
    expect(authenticator.calls).toEqual([]);
    expect(observed).toMatchObject([{ allowed: false, code, credential: 'api_key' }]);
  });

  it('a 405 names the methods the route serves', () => {
    const verdict = setup().pipeline.authorize(request('PUT', `Bearer ${KEY}`), '/mcp') as Verdict;
    expect(verdict).toMatchObject({ allow: false, status: 405, allowedMethods: ['DELETE', 'GET', 'POST'] });
  });
});

describe('RequestPipeline: what the credential\'s shape settles costs no authentication', () => {
  it.each([
    ['no credential', undefined, 'missing_credential'],
    ['another scheme', 'Basic YTpi', 'invalid_credential'],
    ['two Authorization headers', ['Bearer a', 'Bearer b'], 'duplicate_header'],
    ['a token of neither shape', 'Bearer abc', 'invalid_credential'],
    ['an admin token on an API-key route', `Bearer ${TOKEN}`, 'wrong_credential_type'],
  ])('%s: %s', (_what, authorization, code) => {
    const { pipeline, authenticator } = setup();
    expect(outcome(pipeline.authorize(request('POST', authorization), EVENTS) as Verdict)).toBe(code);
    expect(authenticator.calls).toEqual([]);
  });

  it('an API key on an admin endpoint is refused by its shape: no store read, no argon2id', async () => {
    const { pipeline, authenticator } = setup();
    expect(await pipeline.authorizeAdmin(request('GET', `Bearer ${KEY}`))).toMatchObject({ allow: false, code: 'wrong_credential_type', status: 401 });
    expect(authenticator.calls).toEqual([]);
  });
});

describe('RequestPipeline: authenticate, then decide', () => {
  it('a cached key is decided at once: no promise', () => {
    const { pipeline, authenticator, uses, observed } = setup();
    const verdict = pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS);
    expect(verdict).not.toBeInstanceOf(Promise);
    expect(verdict).toMatchObject({ allow: true, route: { name: 'events' }, params: { agent_id: 7 }, principal: { kind: 'api_key', keyId: 1 } });
    expect(authenticator.calls).toEqual([{ kind: 'api_key', token: KEY }]);
    expect(uses).toEqual([1]);
    expect(observed).toMatchObject([{ allowed: true, code: undefined, credential: 'api_key', route: 'events' }]);
  });

  it('a first use is decided once authenticated', async () => {
    const { pipeline, authenticator, observed } = setup();
    authenticator.answer = () => Promise.resolve(apiKey(['events:write']));
    const verdict = pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS);
    expect(verdict).toBeInstanceOf(Promise);
    expect(outcome(await verdict)).toBe('allow');
    expect(observed).toHaveLength(1);
  });

  it.each([
    ['revoked', apiKey(['events:write'], { revoked: true }), 'revoked_credential', false],
    ['expired', apiKey(['events:write'], { expiresAt: NOW }), 'expired_credential', false],
    ['lacking the scope', apiKey(['mcp:calls']), 'insufficient_scope', true],
    ['bound to another agent', apiKey(['events:write'], { agentId: 8 }), 'agent_mismatch', true],
    ['allowed', apiKey(['events:write'], { agentId: 7 }), 'allow', true],
  ] as const)('a key %s: %s; its use recorded: %s', (_what, principal: ApiKeyPrincipal, code, used) => {
    const { pipeline, authenticator, uses } = setup();
    authenticator.answer = () => principal;
    expect(outcome(pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS) as Verdict)).toBe(code);
    expect(uses).toEqual(used ? [1] : []);
  });

  it('a credential that proves no one is refused as authentication said, with its details', async () => {
    const { pipeline, authenticator } = setup();
    authenticator.answer = () => Promise.resolve(deny('rate_limited', 'Too many failed attempts for this key prefix', { retryAfter: 42 }));
    expect(await pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS)).toMatchObject({ allow: false, code: 'rate_limited', retryAfter: 42 });
  });

  it('a failure rejects, and is observed once with its code', async () => {
    const { pipeline, authenticator, observed } = setup();
    authenticator.answer = () => Promise.reject(new GatewayError('store_unavailable', 'down'));
    await expect(pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS)).rejects.toMatchObject({ code: 'store_unavailable' });
    expect(observed).toMatchObject([{ allowed: false, code: 'store_unavailable', route: 'events' }]);
  });

  it('is not observed when the caller observes the whole request itself (MCP)', () => {
    const { pipeline, observed } = setup();
    pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS, false);
    expect(observed).toEqual([]);
  });
});

describe('RequestPipeline: the admin guard of the gateway\'s own endpoints', () => {
  it('allows an admin token, refusing an expired one as decide() does', async () => {
    const { pipeline, authenticator } = setup();
    expect(await pipeline.authorizeAdmin(request('GET', `Bearer ${TOKEN}`))).toEqual(ADMIN);
    authenticator.answer = () => ({ ...ADMIN, expiresAt: NOW });
    expect(await pipeline.authorizeAdmin(request('GET', `Bearer ${TOKEN}`))).toMatchObject({ allow: false, code: 'expired_credential' });
  });
});

describe('RequestPipeline: MCP messages', () => {
  it('decides the messages for the principal the credential was allowed as', () => {
    const { pipeline, authenticator } = setup();
    authenticator.answer = () => apiKey(['mcp:knowledge']);
    const verdict = pipeline.authorize(request('POST', `Bearer ${KEY}`), '/mcp') as Verdict;
    if (!verdict.allow) throw new Error('expected the credential to be allowed');
    const call = (name: string) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } });
    const post = request('POST', `Bearer ${KEY}`);
    expect(pipeline.decideExchange(verdict, post, [call('search_knowledge_base')])).toMatchObject({ allow: true });
    expect(pipeline.decideExchange(verdict, post, [call('place_outbound_call')])).toMatchObject({ allow: false, code: 'insufficient_scope', messageIndex: 0, messageId: 1 });
  });

  it('refuses an Origin that MCP_ALLOWED_ORIGINS does not list before the credential is verified', () => {
    const { pipeline, authenticator } = setup();
    let asked = 0;
    authenticator.answer = () => {
      asked++;
      return apiKey(['mcp:knowledge']);
    };
    expect(outcome(pipeline.authorize(request('POST', `Bearer ${KEY}`, ['Origin', 'https://evil.example']), '/mcp') as Verdict)).toBe('origin_not_allowed');
    expect(outcome(pipeline.authorize(request('POST', undefined, ['Origin', 'https://evil.example']), '/mcp') as Verdict)).toBe('origin_not_allowed');
    expect(asked).toBe(0);
    expect(outcome(pipeline.authorize(request('POST', `Bearer ${KEY}`), '/mcp') as Verdict)).toBe('allow');
  });

  it('decides the protocol version of every exchange, and the mirror headers against the message', () => {
    const { pipeline, authenticator } = setup();
    authenticator.answer = () => apiKey(['mcp:knowledge']);
    const call = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'search_knowledge_base', arguments: {} } };
    /** A request with these raw headers, admitted as the MCP door admits it, then decided as an exchange. */
    const exchange = (raw: string[], messages?: unknown[]) => {
      const post = request('POST', `Bearer ${KEY}`, raw);
      const verdict = pipeline.authorize(post, '/mcp') as Verdict;
      if (!verdict.allow) throw new Error('expected the credential to be allowed');
      return pipeline.decideExchange(verdict, post, messages);
    };
    expect(exchange(['MCP-Protocol-Version', '1999-01-01'])).toMatchObject({ allow: false, code: 'unsupported_protocol_version', requested: '1999-01-01' });
    expect(exchange(['MCP-Protocol-Version', '2026-07-28', 'mcp-protocol-version', '2026-07-28'])).toMatchObject({ code: 'unsupported_protocol_version' });
    expect(exchange(['MCP-Protocol-Version', '2026-07-28', 'Mcp-Method', 'tools/call', 'Mcp-Name', 'search_knowledge_base'], [call])).toEqual({ allow: true });
    expect(exchange(['Mcp-Name', 'place_outbound_call'], [call])).toMatchObject({ allow: false, code: 'header_mismatch' });
    expect(exchange(['Mcp-Name', 'search_knowledge_base', 'MCP-NAME', 'search_knowledge_base'], [call])).toMatchObject({ code: 'header_mismatch' });
    // An underscore spelling is the same header to many stacks behind the gateway.
    expect(exchange(['Mcp-Name', 'search_knowledge_base', 'Mcp_Name', 'place_outbound_call'], [call])).toMatchObject({ code: 'header_mismatch' });
  });
});

describe('RequestPipeline: rate limits, counted once every other rule has passed', () => {
  const limited = apiKey(['events:write', 'mcp:calls', 'mcp:agents'], { rateLimit: { requests: 2, perSeconds: 60 } });

  it('a cached key is counted without a promise; the request past its limit is 429 with the seconds to wait', () => {
    const { pipeline, authenticator, clock, uses, observed, limited: refusedBy } = setup();
    authenticator.answer = () => limited;
    const post = () => pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS) as Verdict;
    expect(post()).toMatchObject({ allow: true, quotas: [{ charge: { limit: 'key' }, remaining: 1, resetSeconds: 60 }] });
    clock.ms = 10_000;
    expect(post()).toMatchObject({ allow: true, quotas: [{ remaining: 0, resetSeconds: 50 }] });
    clock.ms = 20_000;
    expect(post()).toMatchObject({ allow: false, status: 429, code: 'rate_limited', retryAfter: 40, quotas: [{ remaining: 0, resetSeconds: 40 }] });
    // A refused request is still a use of the key, and a decision like any other.
    expect(uses).toEqual([1, 1, 1]);
    expect(observed.map((o) => o.code)).toEqual([undefined, undefined, 'rate_limited']);
    expect(refusedBy).toEqual(['key']);
    clock.ms = 60_001;
    expect(post()).toMatchObject({ allow: true });
  });

  it('a refusal by another rule counts nothing, and tells the key\'s limit as it stands', () => {
    const { pipeline, authenticator } = setup();
    authenticator.answer = () => ({ ...limited, agentId: 8 });
    for (let i = 0; i < 5; i++) {
      expect(pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS)).toMatchObject({ allow: false, code: 'agent_mismatch', quotas: [{ remaining: 2, resetSeconds: 0 }] });
    }
  });

  it('a key without a limit carries none', () => {
    const { pipeline } = setup();
    const verdict = pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS) as Verdict;
    expect(verdict.allow).toBe(true);
    expect(verdict).not.toHaveProperty('quotas');
  });

  it('a count that must ask a shared store is a promise, decided when it answers', async () => {
    const asked: Charge[][] = [];
    const limiter: RateLimiter = {
      take: (charges) => {
        asked.push([...charges]);
        return Promise.resolve({ admitted: false, refused: charges[0]!, retryAfter: 7, quotas: [] });
      },
      peek: (charge) => ({ charge, remaining: 0, resetSeconds: 0 }),
      close: () => {},
    };
    const { pipeline, authenticator } = setup({ limiter });
    authenticator.answer = () => limited;
    const verdict = pipeline.authorize(request('POST', `Bearer ${KEY}`), EVENTS);
    expect(verdict).toBeInstanceOf(Promise);
    expect(await verdict).toMatchObject({ allow: false, code: 'rate_limited', retryAfter: 7 });
    expect(asked).toHaveLength(1);
  });

  it('MCP: counted at the exchange, the tool\'s limit per key on top of the key\'s own', () => {
    const { tools } = defaultYaml();
    const tables = tablesFrom({ tools: { ...tools, limits: { place_outbound_call: { requests: 1, per_seconds: 60 } } } });
    const { pipeline, authenticator, limited: refusedBy } = setup({ tables });
    authenticator.answer = () => limited;
    const call = (name: string) => [{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } }];
    const post = request('POST', `Bearer ${KEY}`);
    const verdict = pipeline.authorize(post, '/mcp') as Verdict;
    if (!verdict.allow) throw new Error('expected the credential to be allowed');
    // Nothing counted when the credential was decided: the key's limit as it stands.
    expect(verdict.quotas).toMatchObject([{ charge: { limit: 'key' }, remaining: 2, resetSeconds: 0 }]);
    // Decided, then counted (after the session check, in the MCP handler).
    const decided = (messages: unknown[], batch = false) => {
      const decision = pipeline.decideExchange(verdict, post, messages, batch);
      return decision.allow === 'count' ? pipeline.countExchange(decision) : decision;
    };
    expect(pipeline.decideExchange(verdict, post, call('place_outbound_call'))).toMatchObject({ allow: 'count', charges: [{ limit: 'key' }, { limit: 'tool', tool: 'place_outbound_call' }] });
    expect(decided(call('place_outbound_call'))).toMatchObject({ allow: true, quotas: [{ remaining: 1 }, { remaining: 0 }] });
    expect(decided(call('place_outbound_call'))).toMatchObject({ allow: false, code: 'rate_limited', retryAfter: 60, messageIndex: 0, messageId: 1 });
    // The tool refused, the key's own count untouched: another tool still gets through.
    expect(decided(call('list_agents'))).toMatchObject({ allow: true, quotas: [{ remaining: 0 }] });
    expect(decided(call('list_agents'))).toMatchObject({ allow: false, code: 'rate_limited' });
    // A batch calling the tool more often than its limit ever allows: refused before anything is counted.
    expect(decided([...call('place_outbound_call'), { ...call('place_outbound_call')[0], id: 2 }], true)).toMatchObject({
      allow: false,
      code: 'rate_limited',
      retryAfter: 60,
      detail: 'The batch calls place_outbound_call 2 times; its rate limit allows 1 per 60 s',
    });
    expect(refusedBy).toEqual(['tool', 'key', 'tool']);
  });
});
