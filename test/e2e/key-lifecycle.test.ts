/* eslint-disable @typescript-eslint/no-explicit-any -- records, problems and audit events are read as loose JSON */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWellFormedKey } from '../../src/credentials/key-format.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { BAD_KEY_IDS, createKey, loginAdmin, request, type JsonResponse } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { createTestDatabase, postgresUrl, type TestDatabase } from '../support/services.ts';

/*
 * Issue 24, the key lifecycle, from outside: GET, PATCH and rotate of /api/v1/api-keys/{id}
 * against a spawned gateway in front of a recording upstream, on both stores. Every answer is
 * checked with its side effect: what the upstream received for the key's next call, what GET
 * and the audit trail show.
 */

const PROBLEM = 'application/problem+json';
const KEYS = '/api/v1/api-keys';
const DAY = 86_400;
/** Every scope the default tables know, ten of them. */
const SCOPES = [
  'events:write',
  'mcp:calls',
  'mcp:knowledge',
  'mcp:transcripts',
  'mcp:agents',
  'mcp:events',
  'mcp:recall',
  'mcp:custom_tools',
  'mcp:orchestrate',
  'mcp:tools',
] as const;

const stores = [
  { name: 'embedded store', postgres: false },
  { name: 'PostgreSQL', postgres: true },
];

/** Polls `check` until it holds (never a fixed sleep); fails with the last value after `timeoutMs`. */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`condition not met in ${timeoutMs} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function expectProblem(response: JsonResponse, status: number, code: string): void {
  expect(response.status, response.text).toBe(status);
  expect(response.headers.get('content-type')).toContain(PROBLEM);
  expect(response.body).toMatchObject({ status, code });
}

/** A gateway in front of a recording upstream, with an admin session and the calls the tests make. */
class Lab {
  readonly gateway: GatewayProcess;
  readonly origin: Origin;
  readonly admin: string;

  constructor(gateway: GatewayProcess, origin: Origin, admin: string) {
    this.gateway = gateway;
    this.origin = origin;
    this.admin = admin;
  }

  static async start(env: Record<string, string>, origin?: Origin): Promise<Lab> {
    const upstream = origin ?? (await startOrigin());
    const gateway = await startGateway({ UPSTREAM_URL: upstream.url, ...env });
    return new Lab(gateway, upstream, await loginAdmin(gateway.url));
  }

  async create(body: Record<string, unknown> = {}): Promise<any> {
    const response = await createKey(this.gateway.url, this.admin, { name: 'lifecycle', scopes: ['events:write'], ...body });
    expect(response.status, response.text).toBe(201);
    return response.body;
  }

  get(id: number | string): Promise<JsonResponse> {
    return request(`${this.gateway.url}${KEYS}/${id}`, { token: this.admin });
  }

  patch(id: number | string, json: unknown): Promise<JsonResponse> {
    return request(`${this.gateway.url}${KEYS}/${id}`, { method: 'PATCH', token: this.admin, json });
  }

  /** A body as bytes with exactly this content type (none: fetch adds none for bytes). */
  patchRaw(id: number | string, body: string, contentType: string | null): Promise<JsonResponse> {
    const headers: Record<string, string> = contentType === null ? {} : { 'content-type': contentType };
    return request(`${this.gateway.url}${KEYS}/${id}`, { method: 'PATCH', token: this.admin, body: new TextEncoder().encode(body), headers });
  }

  rotate(id: number | string, json?: unknown): Promise<JsonResponse> {
    return request(`${this.gateway.url}${KEYS}/${id}/rotate`, { method: 'POST', token: this.admin, json });
  }

  revoke(id: number | string): Promise<JsonResponse> {
    return request(`${this.gateway.url}${KEYS}/${id}`, { method: 'DELETE', token: this.admin });
  }

  async list(): Promise<any[]> {
    const response = await request(`${this.gateway.url}${KEYS}`, { token: this.admin });
    expect(response.status).toBe(200);
    return response.body;
  }

  /** A proxied event with the key, for agent `agent`: the answer and what the upstream received for it. */
  async call(key: string, agent = 7): Promise<{ response: JsonResponse; received: any[] }> {
    const path = `/api/v1/agents/${agent}/events?probe=${Math.random().toString(36).slice(2)}`;
    const response = await request(`${this.gateway.url}${path}`, { method: 'POST', token: key, json: { type: 'probe' } });
    return { response, received: this.origin.received.filter((received) => received.url === path) };
  }

  /** The call went through: 200 from the upstream, which saw the key's id. */
  async expectAccepted(key: string, id: number, agent = 7): Promise<any> {
    const { response, received } = await this.call(key, agent);
    expect(response.status, response.text).toBe(200);
    expect(received).toHaveLength(1);
    expect(received[0].headers['x-auth-key-id']).toBe(String(id));
    return received[0];
  }

  /** The call was refused with `status code`, and nothing reached the upstream. */
  async expectRefused(key: string, status: number, code: string, agent = 7): Promise<void> {
    const { response, received } = await this.call(key, agent);
    expectProblem(response, status, code);
    expect(received).toHaveLength(0);
  }

  /** The key's audit events (key_*), oldest first. */
  async auditOf(id: number): Promise<any[]> {
    const response = await request(`${this.gateway.url}/api/v1/audit-events?limit=500`, { token: this.admin });
    expect(response.status).toBe(200);
    return [...response.body].reverse().filter((event: any) => event.subject_id === String(id) && event.action.startsWith('key_'));
  }

  async stop(): Promise<void> {
    await this.gateway.stop();
  }
}

describe.each(stores)('key lifecycle over HTTP ($name)', ({ postgres }) => {
  const skip = postgres && postgresUrl() === null;
  const databases: TestDatabase[] = [];
  let origin: Origin;
  let lab: Lab;

  /** The store's part of a gateway's environment: a fresh database on PostgreSQL, the default fresh DATA_DIR otherwise. */
  const storeEnv = async (): Promise<Record<string, string>> => {
    if (!postgres) return {};
    const database = await createTestDatabase();
    databases.push(database);
    return { DATABASE_URL: database.url };
  };

  beforeAll(async () => {
    if (skip) return;
    origin = await startOrigin();
    lab = await Lab.start(await storeEnv(), origin);
  });
  afterAll(async () => {
    await lab?.stop();
    await origin?.close();
    for (const database of databases) await database.drop();
  });

  describe.skipIf(skip)('GET /api/v1/api-keys/{id}', () => {
    it('answers the record, as the list and the create show it, never the key', async () => {
      const created = await lab.create({ name: 'read me', agent_id: 7, scopes: ['events:write', 'mcp:agents'] });
      const response = await lab.get(created.id);
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      const { key, ...record } = created;
      expect(response.body).toEqual(record);
      expect(response.body).toEqual({
        id: created.id,
        name: 'read me',
        agent_id: 7,
        key_prefix: key.slice(0, 12),
        scopes: ['events:write', 'mcp:agents'],
        is_active: true,
        status: 'active',
        created_at: expect.any(String),
        last_used_at: null,
        expires_at: null,
        enabled: true,
        updated_at: created.created_at,
        rate_limit: null,
        rotated_from: null,
        rotated_to: null,
      });
      expect(response.text).not.toContain(key);
      expect((await lab.list()).find((listed) => listed.id === created.id)).toEqual(response.body);
    });

    it('answers a revoked key too, with its status', async () => {
      const created = await lab.create();
      expect((await lab.revoke(created.id)).status).toBe(204);
      const response = await lab.get(created.id);
      expect(response.status).toBe(200);
      expect(response.body).toMatchObject({ id: created.id, status: 'revoked', is_active: false, enabled: true });
    });

    it.each(BAD_KEY_IDS)('with %s (%s) is %i %s, as DELETE answers it', async (_what, id, status, code) => {
      const read = await lab.get(id);
      expectProblem(read, status, code);
      expectProblem(await lab.revoke(id), status, code);
      expectProblem(await lab.patch(id, { name: 'x' }), status, code);
      expectProblem(await lab.rotate(id), status, code);
      expect(read.text).not.toContain('"key"');
    });

    it('is an admin\'s only: an API key is 401 wrong_credential_type, no credential 401 missing_credential', async () => {
      const created = await lab.create();
      for (const [method, path] of [['GET', `${KEYS}/${created.id}`], ['PATCH', `${KEYS}/${created.id}`], ['POST', `${KEYS}/${created.id}/rotate`]] as const) {
        const json = method === 'GET' ? undefined : method === 'PATCH' ? { enabled: false } : {};
        expectProblem(await request(`${lab.gateway.url}${path}`, { method, token: created.key, json }), 401, 'wrong_credential_type');
        expectProblem(await request(`${lab.gateway.url}${path}`, { method, json }), 401, 'missing_credential');
      }
      // Nothing was changed or rotated by the refused calls.
      expect((await lab.get(created.id)).body).toMatchObject({ enabled: true, rotated_to: null });
      expect((await lab.auditOf(created.id)).map((event) => event.action)).toEqual(['key_created']);
    });

    it('refuses other methods on the key and rotate paths with 405 and Allow', async () => {
      const created = await lab.create();
      const put = await request(`${lab.gateway.url}${KEYS}/${created.id}`, { method: 'PUT', token: lab.admin, json: { name: 'x' } });
      expectProblem(put, 405, 'method_not_allowed');
      expect(put.headers.get('allow')).toBe('GET, PATCH, DELETE');
      const getRotate = await request(`${lab.gateway.url}${KEYS}/${created.id}/rotate`, { token: lab.admin });
      expectProblem(getRotate, 405, 'method_not_allowed');
      expect(getRotate.headers.get('allow')).toBe('POST');
    });
  });

  describe.skipIf(skip)('PATCH /api/v1/api-keys/{id}', () => {
    it('changes the name and the rate limit: 200, the record, GET shows it, key_updated names the fields', async () => {
      const created = await lab.create({ name: 'before' });
      const response = await lab.patch(created.id, { name: '  after  ', rate_limit: { requests: 100, per_seconds: 60 } });
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(response.body).toMatchObject({ id: created.id, name: 'after', rate_limit: { requests: 100, per_seconds: 60 }, status: 'active' });
      expect(response.body).not.toHaveProperty('key');
      expect(Date.parse(response.body.updated_at)).toBeGreaterThan(Date.parse(created.updated_at));
      expect((await lab.get(created.id)).body).toEqual(response.body);
      // The key is untouched by the change: it still works, and the upstream sees it as before.
      await lab.expectAccepted(created.key, created.id);
      const events = await lab.auditOf(created.id);
      expect(events.map((event) => event.action)).toEqual(['key_created', 'key_updated']);
      expect(events[1]).toMatchObject({ actor_kind: 'admin', actor_id: expect.stringMatching(/^[1-9][0-9]*$/), client_address: '127.0.0.1', detail: { fields: ['name', 'rate_limit'] } });
    });

    it('narrowing the scopes is in force before the answer: the next call needing the removed scope is 403, never forwarded', async () => {
      const created = await lab.create({ scopes: ['events:write', 'mcp:agents'] });
      const before = await lab.expectAccepted(created.key, created.id);
      expect(before.headers['x-auth-scopes']).toBe('events:write mcp:agents');
      const response = await lab.patch(created.id, { scopes: ['mcp:agents'] });
      expect(response.status).toBe(200);
      expect(response.body.scopes).toEqual(['mcp:agents']);
      const { response: refused, received } = await lab.call(created.key);
      expectProblem(refused, 403, 'insufficient_scope');
      expect(refused.headers.get('www-authenticate')).toContain('scope="events:write"');
      expect(received).toHaveLength(0);
      // Widened again: the next call goes through, with the scopes as granted now.
      const widened = await lab.patch(created.id, { scopes: ['mcp:agents', 'events:write', 'mcp:agents'] });
      expect(widened.body.scopes).toEqual(['mcp:agents', 'events:write']);
      expect((await lab.expectAccepted(created.key, created.id)).headers['x-auth-scopes']).toBe('mcp:agents events:write');
      expect((await lab.auditOf(created.id)).slice(1).map((event) => event.detail)).toEqual([{ fields: ['scopes'] }, { fields: ['scopes'] }]);
    });

    it('binding to an agent and clearing it with null are in force before the answer', async () => {
      const created = await lab.create();
      expect((await lab.expectAccepted(created.key, created.id, 8)).headers['x-auth-agent-id']).toBeUndefined();
      const bound = await lab.patch(created.id, { agent_id: 7 });
      expect(bound.body.agent_id).toBe(7);
      await lab.expectRefused(created.key, 403, 'agent_mismatch', 8);
      expect((await lab.expectAccepted(created.key, created.id, 7)).headers['x-auth-agent-id']).toBe('7');
      const cleared = await lab.patch(created.id, { agent_id: null });
      expect(cleared.status).toBe(200);
      expect(cleared.body.agent_id).toBeNull();
      expect((await lab.expectAccepted(created.key, created.id, 8)).headers['x-auth-agent-id']).toBeUndefined();
    });

    it('an expiry, set and cleared, is in force before the answer; a near one ends the key when it passes', async () => {
      const created = await lab.create();
      await lab.expectAccepted(created.key, created.id);
      const later = new Date(Date.now() + 3_600_000).toISOString();
      const expiring = await lab.patch(created.id, { expires_at: later });
      expect(expiring.body.expires_at).toBe(later);
      const cleared = await lab.patch(created.id, { expires_at: null, rate_limit: null });
      expect(cleared.body).toMatchObject({ expires_at: null, rate_limit: null });
      const soon = new Date(Date.now() + 3_000).toISOString();
      expect((await lab.patch(created.id, { expires_at: soon })).body.expires_at).toBe(soon);
      await lab.expectAccepted(created.key, created.id);
      await until(() => lab.call(created.key), ({ response }) => response.status !== 200);
      await lab.expectRefused(created.key, 401, 'expired_credential');
      expect((await lab.get(created.id)).body).toMatchObject({ status: 'expired', is_active: false });
    });

    it('takes application/merge-patch+json as JSON, with a charset too', async () => {
      const created = await lab.create();
      const response = await lab.patchRaw(created.id, '{"name":"merged","rate_limit":{"requests":5,"per_seconds":1}}', 'application/merge-patch+json');
      expect(response.status, response.text).toBe(200);
      expect(response.body).toMatchObject({ name: 'merged', rate_limit: { requests: 5, per_seconds: 1 } });
      const charset = await lab.patchRaw(created.id, '{"rate_limit":null}', 'application/merge-patch+json; charset=utf-8');
      expect(charset.status, charset.text).toBe(200);
      expect(charset.body.rate_limit).toBeNull();
      expect((await lab.get(created.id)).body).toMatchObject({ name: 'merged', rate_limit: null });
    });

    it('the merge-patch media type is PATCH\'s only: a create or a login sent as one is 415, and creates nothing', async () => {
      const count = (await lab.list()).length;
      const headers = { 'content-type': 'application/merge-patch+json' };
      const create = await request(`${lab.gateway.url}${KEYS}`, { method: 'POST', token: lab.admin, headers, body: '{"name":"x"}' });
      expectProblem(create, 415, 'unsupported_media_type');
      const login = await request(`${lab.gateway.url}/api/v1/auth/login`, { method: 'POST', headers, body: JSON.stringify({ email: ADMIN_EMAIL, password: ADMIN_PASSWORD }) });
      expectProblem(login, 415, 'unsupported_media_type');
      expect(await lab.list()).toHaveLength(count);
    });

    it('a patch that changes nothing answers the record, and stores and audits nothing', async () => {
      const created = await lab.create({ name: 'same', scopes: ['events:write'] });
      const response = await lab.patch(created.id, { name: 'same', scopes: ['events:write', 'events:write'], enabled: true, rate_limit: null });
      expect(response.status).toBe(200);
      expect(response.body.updated_at).toBe(created.updated_at);
      expect((await lab.auditOf(created.id)).map((event) => event.action)).toEqual(['key_created']);
    });

    const past = '2020-01-01T00:00:00Z';
    it.each([
      ['an empty object', {}, 'body'],
      ['an unknown field', { name: 'x', admin: true }, 'admin'],
      ['a field only the record has', { status: 'active' }, 'status'],
      ['revoked_at', { revoked_at: null }, 'revoked_at'],
      ['the key itself', { key: 'ghk_x' }, 'key'],
      ['rotated_to', { rotated_to: 1 }, 'rotated_to'],
      ['a null name', { name: null }, 'name'],
      ['an empty name', { name: '' }, 'name'],
      ['a blank name', { name: '   ' }, 'name'],
      ['an over-long name', { name: 'x'.repeat(201) }, 'name'],
      ['agent_id 0', { agent_id: 0 }, 'agent_id'],
      ['agent_id as a string', { agent_id: '5' }, 'agent_id'],
      ['a fractional agent_id', { agent_id: 1.5 }, 'agent_id'],
      ['null scopes', { scopes: null }, 'scopes'],
      ['an empty scopes list', { scopes: [] }, 'scopes'],
      ['an unknown scope', { scopes: ['events:read'] }, 'scopes.0'],
      ['a wildcard scope', { scopes: ['mcp:*'] }, 'scopes.0'],
      ['an expires_at in the past', { expires_at: past }, 'expires_at'],
      ['an expires_at without a time zone', { expires_at: '2099-01-01T00:00:00' }, 'expires_at'],
      ['an expires_at as a number', { expires_at: 4102444800 }, 'expires_at'],
      ['enabled as a string', { enabled: 'false' }, 'enabled'],
      ['enabled null', { enabled: null }, 'enabled'],
      ['enabled as 0', { enabled: 0 }, 'enabled'],
      ['a rate limit of 0 requests', { rate_limit: { requests: 0, per_seconds: 1 } }, 'rate_limit.requests'],
      ['a rate limit over 1,000,000 requests', { rate_limit: { requests: 1_000_001, per_seconds: 1 } }, 'rate_limit.requests'],
      ['a rate limit over a day', { rate_limit: { requests: 1, per_seconds: 86_401 } }, 'rate_limit.per_seconds'],
      ['a fractional rate limit', { rate_limit: { requests: 1.5, per_seconds: 1 } }, 'rate_limit.requests'],
      ['a rate limit without per_seconds', { rate_limit: { requests: 1 } }, 'rate_limit.per_seconds'],
      ['a rate limit with an unknown field', { rate_limit: { requests: 1, per_seconds: 1, burst: 2 } }, 'rate_limit'],
      ['a rate limit as a number', { rate_limit: 10 }, 'rate_limit'],
      ['a valid field beside a bad one', { name: 'fine', agent_id: -1 }, 'agent_id'],
    ])('refuses %s with 400 validation_failed naming the field, and changes nothing', async (_what, body, field) => {
      const created = await lab.create({ name: 'untouched' });
      const response = await lab.patch(created.id, body);
      expectProblem(response, 400, 'validation_failed');
      expect(response.body.errors.map((error: { field: string }) => error.field)).toContain(field);
      const { key, ...record } = created;
      expect((await lab.get(created.id)).body).toEqual(record);
      expect((await lab.auditOf(created.id)).map((event) => event.action)).toEqual(['key_created']);
      await lab.expectAccepted(key, created.id);
    });

    it.each([
      ['a JSON array', '[]', 'application/json', 400],
      ['a JSON array of a patch', '[{"name":"x"}]', 'application/json', 400],
      ['JSON null', 'null', 'application/json', 400],
      ['JSON null as a merge patch', 'null', 'application/merge-patch+json', 400],
      ['a JSON string', '"name"', 'application/json', 400],
      ['a JSON number', '42', 'application/json', 400],
      ['broken JSON', '{"name": ', 'application/json', 400],
      ['broken JSON as a merge patch', '{"name": ', 'application/merge-patch+json', 400],
      ['an empty JSON body', '', 'application/json', 400],
      ['prototype pollution', '{"name":"x","__proto__":{"enabled":false}}', 'application/json', 400],
      ['prototype pollution in a merge patch', '{"constructor":{"prototype":{"enabled":false}}}', 'application/merge-patch+json', 400],
      ['a form body', 'name=x', 'application/x-www-form-urlencoded', 415],
      ['plain text', '{"name":"x"}', 'text/plain', 415],
      ['JSON Patch (RFC 6902)', '[{"op":"replace","path":"/name","value":"x"}]', 'application/json-patch+json', 415],
      ['no content type', '{"name":"x"}', null, 415],
    ])('refuses %s as a body with a problem (%s as %s: %i), never a 500', async (_what, body, type, status) => {
      const created = await lab.create({ name: 'untouched' });
      const response = await lab.patchRaw(created.id, body, type);
      expect(response.status, response.text).toBe(status);
      expect(response.headers.get('content-type')).toContain(PROBLEM);
      expect(response.body.status).toBe(status);
      expect((await lab.get(created.id)).body).toMatchObject({ name: 'untouched', enabled: true, updated_at: created.updated_at });
    });

    it('with no body at all is 400 validation_failed', async () => {
      const created = await lab.create();
      const response = await request(`${lab.gateway.url}${KEYS}/${created.id}`, { method: 'PATCH', token: lab.admin });
      expectProblem(response, 400, 'validation_failed');
    });

    it('disable: the key is refused with 401 disabled_credential at once, never forwarded; enable: it works again', async () => {
      const created = await lab.create();
      await lab.expectAccepted(created.key, created.id);
      const disabled = await lab.patch(created.id, { enabled: false });
      expect(disabled.status).toBe(200);
      expect(disabled.body).toMatchObject({ enabled: false, status: 'disabled', is_active: false });
      const { response, received } = await lab.call(created.key);
      expectProblem(response, 401, 'disabled_credential');
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
      expect(received).toHaveLength(0);
      // A disabled key can still be changed, and stays disabled.
      expect((await lab.patch(created.id, { name: 'parked' })).body).toMatchObject({ name: 'parked', status: 'disabled' });
      await lab.expectRefused(created.key, 401, 'disabled_credential');
      const enabled = await lab.patch(created.id, { enabled: true });
      expect(enabled.body).toMatchObject({ enabled: true, status: 'active', is_active: true });
      await lab.expectAccepted(created.key, created.id);
      const events = await lab.auditOf(created.id);
      expect(events.map((event) => [event.action, event.detail])).toEqual([
        ['key_created', {}],
        ['key_disabled', {}],
        ['key_updated', { fields: ['name'] }],
        ['key_enabled', {}],
      ]);
    });

    it('disabling and changing a field at once is two events: key_disabled and key_updated with the other fields', async () => {
      const created = await lab.create();
      const response = await lab.patch(created.id, { enabled: false, scopes: ['mcp:agents'], agent_id: 3 });
      expect(response.status).toBe(200);
      const events = await lab.auditOf(created.id);
      expect(events.slice(1).map((event) => [event.action, event.detail])).toEqual([
        ['key_disabled', {}],
        ['key_updated', { fields: ['scopes', 'agent_id'] }],
      ]);
    });

    it('a revoked key is 409 key_revoked, whatever the patch, and stays revoked', async () => {
      const created = await lab.create();
      expect((await lab.revoke(created.id)).status).toBe(204);
      for (const body of [{ name: 'again' }, { enabled: true }, { expires_at: null }, { enabled: false }]) {
        const response = await lab.patch(created.id, body);
        expectProblem(response, 409, 'key_revoked');
      }
      expect((await lab.get(created.id)).body).toMatchObject({ status: 'revoked', name: 'lifecycle', enabled: true });
      await lab.expectRefused(created.key, 401, 'revoked_credential');
      expect((await lab.auditOf(created.id)).map((event) => event.action)).toEqual(['key_created', 'key_revoked']);
    });

    it('a bad body on a revoked or unknown key is still 400: the body is read before the key', async () => {
      const created = await lab.create();
      expect((await lab.revoke(created.id)).status).toBe(204);
      expectProblem(await lab.patch(created.id, {}), 400, 'validation_failed');
      expectProblem(await lab.patch(999_999, { name: 'x' }), 404, 'not_found');
    });
  });

  describe.skipIf(skip)('POST /api/v1/api-keys/{id}/rotate', () => {
    it('with the default grace: 201, Location, the new key once, copied fields; both keys work for a day', async () => {
      const expiresAt = new Date(Date.now() + 30 * DAY * 1000).toISOString();
      const old = await lab.create({ name: 'rotating', agent_id: 7, scopes: ['events:write', 'mcp:agents'], expires_at: expiresAt });
      expect((await lab.patch(old.id, { rate_limit: { requests: 50, per_seconds: 10 } })).status).toBe(200);
      await lab.expectAccepted(old.key, old.id);
      const before = Date.now();
      const response = await lab.rotate(old.id);
      const after = Date.now();
      expect(response.status, response.text).toBe(201);
      const next = response.body;
      expect(response.headers.get('location')).toBe(`${KEYS}/${next.id}`);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(isWellFormedKey(next.key)).toBe(true);
      expect(next.key).not.toBe(old.key);
      expect(next).toMatchObject({
        name: 'rotating',
        agent_id: 7,
        scopes: ['events:write', 'mcp:agents'],
        expires_at: expiresAt,
        enabled: true,
        rate_limit: { requests: 50, per_seconds: 10 },
        rotated_from: old.id,
        rotated_to: null,
        status: 'active',
        key_prefix: next.key.slice(0, 12),
        last_used_at: null,
      });
      expect(next.id).toBeGreaterThan(old.id);
      const { key: _shown, ...record } = next;
      expect((await lab.get(next.id)).body).toEqual(record);
      expect((await lab.get(next.id)).text).not.toContain(next.key);

      const oldRecord = (await lab.get(old.id)).body;
      expect(oldRecord).toMatchObject({ rotated_to: next.id, rotated_from: null, status: 'active', is_active: true });
      const graceEnds = Date.parse(oldRecord.expires_at);
      expect(graceEnds).toBeGreaterThanOrEqual(before + DAY * 1000 - 1000);
      expect(graceEnds).toBeLessThanOrEqual(after + DAY * 1000 + 1000);

      // Both keys are accepted, each as itself, bound and scoped as before.
      expect((await lab.expectAccepted(old.key, old.id)).headers['x-auth-scopes']).toBe('events:write mcp:agents');
      const received = await lab.expectAccepted(next.key, next.id);
      expect(received.headers).toMatchObject({ 'x-auth-agent-id': '7', 'x-auth-scopes': 'events:write mcp:agents' });
      await lab.expectRefused(next.key, 403, 'agent_mismatch', 8);

      const [event] = (await lab.auditOf(old.id)).filter((audit) => audit.action === 'key_rotated');
      expect(event).toMatchObject({ actor_kind: 'admin', client_address: '127.0.0.1', detail: { from: old.id, to: next.id, grace_seconds: DAY } });
    });

    it('keeps the old key\'s own expiry when it ends before the grace period', async () => {
      const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
      const old = await lab.create({ expires_at: expiresAt });
      const response = await lab.rotate(old.id, { grace_seconds: 7 * DAY });
      expect(response.status).toBe(201);
      expect(response.body.expires_at).toBe(expiresAt);
      expect((await lab.get(old.id)).body).toMatchObject({ expires_at: expiresAt, rotated_to: response.body.id });
    });

    it('copies a disabled key\'s state: the new key is disabled too until enabled', async () => {
      const old = await lab.create();
      expect((await lab.patch(old.id, { enabled: false })).status).toBe(200);
      const next = (await lab.rotate(old.id, { grace_seconds: 60 })).body;
      expect(next).toMatchObject({ enabled: false, status: 'disabled', rotated_from: old.id });
      await lab.expectRefused(next.key, 401, 'disabled_credential');
      expect((await lab.patch(next.id, { enabled: true })).status).toBe(200);
      await lab.expectAccepted(next.key, next.id);
    });

    it('grace_seconds 0 revokes the old key before the answer: its next call is 401 revoked_credential', async () => {
      const old = await lab.create();
      await lab.expectAccepted(old.key, old.id);
      const response = await lab.rotate(old.id, { grace_seconds: 0 });
      expect(response.status).toBe(201);
      await lab.expectRefused(old.key, 401, 'revoked_credential');
      await lab.expectAccepted(response.body.key, response.body.id);
      expect((await lab.get(old.id)).body).toMatchObject({ status: 'revoked', is_active: false, rotated_to: response.body.id });
      const [event] = (await lab.auditOf(old.id)).filter((audit) => audit.action === 'key_rotated');
      expect(event.detail).toEqual({ from: old.id, to: response.body.id, grace_seconds: 0, revoked: [old.id] });
    });

    it('a short grace period ends the old key when it passes (expired_credential), the new one keeps working', async () => {
      const old = await lab.create();
      await lab.expectAccepted(old.key, old.id);
      const next = (await lab.rotate(old.id, { grace_seconds: 3 })).body;
      await lab.expectAccepted(old.key, old.id);
      await until(() => lab.call(old.key), ({ response }) => response.status !== 200);
      await lab.expectRefused(old.key, 401, 'expired_credential');
      await lab.expectAccepted(next.key, next.id);
      expect((await lab.get(old.id)).body).toMatchObject({ status: 'expired', rotated_to: next.id });
    });

    it('a rotated key is 409 key_rotated; a revoked one 409 key_revoked; an expired one 409 key_expired; nothing is created', async () => {
      const rotated = await lab.create();
      expect((await lab.rotate(rotated.id)).status).toBe(201);
      const revoked = await lab.create();
      expect((await lab.revoke(revoked.id)).status).toBe(204);
      const expiring = await lab.create({ expires_at: new Date(Date.now() + 1_500).toISOString() });
      await until(() => lab.get(expiring.id), (response) => response.body.status === 'expired');
      const count = (await lab.list()).length;
      expectProblem(await lab.rotate(rotated.id), 409, 'key_rotated');
      expectProblem(await lab.rotate(revoked.id, { grace_seconds: 0 }), 409, 'key_revoked');
      expectProblem(await lab.rotate(expiring.id), 409, 'key_expired');
      expect(await lab.list()).toHaveLength(count);
      for (const key of [rotated, revoked, expiring]) {
        expect((await lab.auditOf(key.id)).filter((event) => event.action === 'key_rotated').length).toBe(key === rotated ? 1 : 0);
      }
    });

    it.each([
      ['a negative grace', { grace_seconds: -1 }, 'grace_seconds'],
      ['a grace over 30 days', { grace_seconds: 2_592_001 }, 'grace_seconds'],
      ['a fractional grace', { grace_seconds: 1.5 }, 'grace_seconds'],
      ['a grace as a string', { grace_seconds: '60' }, 'grace_seconds'],
      ['a null grace', { grace_seconds: null }, 'grace_seconds'],
      ['an unknown field', { grace: 60 }, 'grace'],
    ])('refuses %s with 400 validation_failed and rotates nothing', async (_what, body, field) => {
      const old = await lab.create();
      const response = await lab.rotate(old.id, body);
      expectProblem(response, 400, 'validation_failed');
      expect(response.body.errors.map((error: { field: string }) => error.field)).toContain(field);
      expect((await lab.get(old.id)).body).toMatchObject({ rotated_to: null, expires_at: null });
    });

    it.each([
      ['a JSON array', '[]', 'application/json', 400],
      ['JSON null', 'null', 'application/json', 400],
      ['a JSON number', '60', 'application/json', 400],
      ['broken JSON', '{"grace_seconds": ', 'application/json', 400],
      ['plain text', '{}', 'text/plain', 415],
      ['a merge patch (PATCH only)', '{}', 'application/merge-patch+json', 415],
    ])('refuses %s as a rotate body (%s as %s: %i) and rotates nothing', async (_what, body, type, status) => {
      const old = await lab.create();
      const response = await request(`${lab.gateway.url}${KEYS}/${old.id}/rotate`, { method: 'POST', token: lab.admin, body, headers: { 'content-type': type } });
      expect(response.status, response.text).toBe(status);
      expect(response.headers.get('content-type')).toContain(PROBLEM);
      expect((await lab.get(old.id)).body.rotated_to).toBeNull();
    });

    it('takes the longest grace, 30 days, and an empty object', async () => {
      const longest = await lab.create();
      const response = await lab.rotate(longest.id, { grace_seconds: 2_592_000 });
      expect(response.status).toBe(201);
      expect(Date.parse((await lab.get(longest.id)).body.expires_at)).toBeGreaterThan(Date.now() + 29 * DAY * 1000);
      const empty = await lab.create();
      expect((await lab.rotate(empty.id, {})).status).toBe(201);
      const [event] = (await lab.auditOf(empty.id)).filter((audit) => audit.action === 'key_rotated');
      expect(event.detail.grace_seconds).toBe(DAY);
    });

    it('chain rule: rotating B while A is in its grace period revokes A at once; B and C keep working', async () => {
      const a = await lab.create({ name: 'chain' });
      const b = (await lab.rotate(a.id, { grace_seconds: 3600 })).body;
      await lab.expectAccepted(a.key, a.id);
      await lab.expectAccepted(b.key, b.id);
      const c = await lab.rotate(b.id, { grace_seconds: 3600 });
      expect(c.status).toBe(201);
      expect(c.body).toMatchObject({ rotated_from: b.id, name: 'chain' });
      await lab.expectRefused(a.key, 401, 'revoked_credential');
      await lab.expectAccepted(b.key, b.id);
      await lab.expectAccepted(c.body.key, c.body.id);
      expect((await lab.get(a.id)).body).toMatchObject({ status: 'revoked', rotated_to: b.id });
      expect((await lab.get(b.id)).body).toMatchObject({ status: 'active', rotated_from: a.id, rotated_to: c.body.id });
    });

    it('a rotated key\'s expiry can only be brought forward by PATCH; its other fields change as any key\'s', async () => {
      const old = await lab.create();
      const next = (await lab.rotate(old.id, { grace_seconds: 3600 })).body;
      const graceEnds = (await lab.get(old.id)).body.expires_at;
      expectProblem(await lab.patch(old.id, { expires_at: null }), 409, 'key_rotated');
      expectProblem(await lab.patch(old.id, { expires_at: new Date(Date.parse(graceEnds) + 60_000).toISOString() }), 409, 'key_rotated');
      expect((await lab.get(old.id)).body.expires_at).toBe(graceEnds);
      const sooner = new Date(Date.now() + 3_000).toISOString();
      const brought = await lab.patch(old.id, { expires_at: sooner });
      expect(brought.status).toBe(200);
      expect(brought.body).toMatchObject({ expires_at: sooner, rotated_to: next.id });
      expect((await lab.patch(old.id, { name: 'old one' })).body.name).toBe('old one');
      await until(() => lab.call(old.key), ({ response }) => response.status !== 200);
      await lab.expectRefused(old.key, 401, 'expired_credential');
      await lab.expectAccepted(next.key, next.id);
    });
  });

  describe.skipIf(skip)('the licence (LICENSE_API_KEYS)', () => {
    let capped: Lab | undefined;
    afterAll(async () => {
      await capped?.stop();
    });

    it('disabled keys count; enabling while under the cap works; a rotation at the cap is 201 and takes no place', async () => {
      capped = await Lab.start({ LICENSE_API_KEYS: '2', ...(await storeEnv()) }, origin);
      const a = await capped.create({ name: 'a' });
      const b = await capped.create({ name: 'b' });
      expect((await capped.patch(a.id, { enabled: false })).status).toBe(200);
      expectProblem(await createKey(capped.gateway.url, capped.admin, { name: 'c' }), 402, 'license_limit');
      const enabled = await capped.patch(a.id, { enabled: true });
      expect(enabled.status, enabled.text).toBe(200);
      await capped.expectAccepted(a.key, a.id);

      // At the cap: rotation is never refused for it, and the old key in its grace period takes no place.
      const rotated = await capped.rotate(b.id);
      expect(rotated.status, rotated.text).toBe(201);
      await capped.expectAccepted(b.key, b.id);
      await capped.expectAccepted(rotated.body.key, rotated.body.id);
      expectProblem(await createKey(capped.gateway.url, capped.admin, { name: 'c' }), 402, 'license_limit');
      const again = await capped.rotate(rotated.body.id, { grace_seconds: 60 });
      expect(again.status).toBe(201);
      expect((await capped.list()).filter((record) => record.is_active)).toHaveLength(3);
    });

    it('enabling is 402 license_limit when the other counted keys reach the cap (it was lowered), and the key stays disabled', async () => {
      const env = { ...(await storeEnv()) };
      let first = await Lab.start({ ...env, LICENSE_API_KEYS: '3' }, origin);
      const dataDir = first.gateway.env.DATA_DIR!;
      const keys = [await first.create({ name: 'x' }), await first.create({ name: 'y' }), await first.create({ name: 'z' })];
      expect((await first.patch(keys[2].id, { enabled: false })).status).toBe(200);
      await first.stop();
      first = await Lab.start({ ...env, DATA_DIR: dataDir, LICENSE_API_KEYS: '2' }, origin);
      try {
        const refused = await first.patch(keys[2].id, { enabled: true });
        expectProblem(refused, 402, 'license_limit');
        // Nothing of the patch is applied, not even its other fields.
        expectProblem(await first.patch(keys[2].id, { enabled: true, name: 'renamed' }), 402, 'license_limit');
        expect((await first.get(keys[2].id)).body).toMatchObject({ enabled: false, status: 'disabled', name: 'z' });
        await first.expectRefused(keys[2].key, 401, 'disabled_credential');
        // A change that does not enable it is still taken.
        expect((await first.patch(keys[2].id, { name: 'renamed' })).status).toBe(200);
        expect((await first.auditOf(keys[2].id)).map((event) => event.action)).toEqual(['key_created', 'key_disabled', 'key_updated']);
        // Revoking one of the others frees the place.
        expect((await first.revoke(keys[0].id)).status).toBe(204);
        expect((await first.patch(keys[2].id, { enabled: true })).status).toBe(200);
        await first.expectAccepted(keys[2].key, keys[2].id);
      } finally {
        await first.stop();
      }
    });

    it('an expired key given a new expiry counts again: refused with 402 while the others reach the cap', async () => {
      const lab1 = await Lab.start({ LICENSE_API_KEYS: '1', ...(await storeEnv()) }, origin);
      try {
        const expiring = await lab1.create({ name: 'expiring', expires_at: new Date(Date.now() + 1_500).toISOString() });
        await until(() => lab1.get(expiring.id), (response) => response.body.status === 'expired');
        const other = await lab1.create({ name: 'in its place' });
        expectProblem(await lab1.patch(expiring.id, { expires_at: null }), 402, 'license_limit');
        expectProblem(await lab1.patch(expiring.id, { expires_at: new Date(Date.now() + DAY * 1000).toISOString() }), 402, 'license_limit');
        expect((await lab1.get(expiring.id)).body.status).toBe('expired');
        await lab1.expectRefused(expiring.key, 401, 'expired_credential');
        expect((await lab1.list()).filter((record) => record.is_active).map((record) => record.id)).toEqual([other.id]);
        // Other changes to the expired key are taken.
        expect((await lab1.patch(expiring.id, { name: 'archived' })).status).toBe(200);
      } finally {
        await lab1.stop();
      }
    });
  });

  describe.skipIf(skip)('concurrency', () => {
    it('10 parallel PATCHes with distinct {name, scopes}: the record ends as exactly one of them, never a mix', async () => {
      const created = await lab.create({ name: 'raced', scopes: ['events:write'] });
      const bodies = SCOPES.map((scope, i) => ({ name: `writer ${i}`, scopes: [scope, SCOPES[(i + 3) % SCOPES.length]] }));
      const responses = await Promise.all(bodies.map((body) => lab.patch(created.id, body)));
      for (const [i, response] of responses.entries()) {
        expect(response.status, response.text).toBe(200);
        // Each answer is its own patch applied whole.
        expect(response.body).toMatchObject(bodies[i]!);
      }
      const final = (await lab.get(created.id)).body;
      const winner = bodies.findIndex((body) => body.name === final.name);
      expect(winner).toBeGreaterThanOrEqual(0);
      expect(final.scopes).toEqual(bodies[winner]!.scopes);
      const updates = (await lab.auditOf(created.id)).filter((event) => event.action === 'key_updated');
      expect(updates).toHaveLength(10);
      // The key in use is the winner's: the cache was dropped after the last change.
      const { response, received } = await lab.call(created.key);
      const scopes = bodies[winner]!.scopes;
      if (scopes.includes('events:write')) {
        expect(response.status).toBe(200);
        expect(received[0].headers['x-auth-scopes']).toBe(scopes.join(' '));
      } else {
        expect(response.status).toBe(403);
        expect(received).toHaveLength(0);
      }
    });

    it('PATCH racing DELETE: the key ends revoked, whatever the order', async () => {
      for (let round = 0; round < 6; round++) {
        const created = await lab.create({ name: `race ${round}` });
        await lab.expectAccepted(created.key, created.id);
        const patch = () => lab.patch(created.id, round % 2 ? { enabled: true, name: 'patched', expires_at: null } : { enabled: false, scopes: ['mcp:agents', 'events:write'] });
        const [first, second] = round < 3 ? await Promise.all([patch(), lab.revoke(created.id)]) : await Promise.all([lab.revoke(created.id), patch()]).then(([d, p]) => [p, d] as const);
        expect(second.status).toBe(204);
        expect([200, 409]).toContain(first.status);
        if (first.status === 409) expect(first.body.code).toBe('key_revoked');
        expect((await lab.get(created.id)).body).toMatchObject({ status: 'revoked', is_active: false });
        await lab.expectRefused(created.key, 401, 'revoked_credential');
        expectProblem(await lab.patch(created.id, { name: 'after' }), 409, 'key_revoked');
      }
    });

    it('5 parallel rotations of one key: one 201, four 409 key_rotated; at most two keys of the chain accept requests', async () => {
      const a = await lab.create({ name: 'parallel' });
      const first = await Promise.all(Array.from({ length: 5 }, () => lab.rotate(a.id, { grace_seconds: 3600 })));
      const won = first.filter((response) => response.status === 201);
      expect(won).toHaveLength(1);
      for (const lost of first.filter((response) => response.status !== 201)) expectProblem(lost, 409, 'key_rotated');
      const b = won[0]!.body;
      const successors = (await lab.list()).filter((record) => record.rotated_from === a.id);
      expect(successors.map((record) => record.id)).toEqual([b.id]);
      expect((await lab.get(a.id)).body.rotated_to).toBe(b.id);
      await lab.expectAccepted(a.key, a.id);
      await lab.expectAccepted(b.key, b.id);

      // Again from B, while A is in its grace period: A ends, B and C work.
      const second = await Promise.all(Array.from({ length: 5 }, () => lab.rotate(b.id, { grace_seconds: 3600 })));
      const wonAgain = second.filter((response) => response.status === 201);
      expect(wonAgain).toHaveLength(1);
      for (const lost of second.filter((response) => response.status !== 201)) expectProblem(lost, 409, 'key_rotated');
      const c = wonAgain[0]!.body;
      await lab.expectRefused(a.key, 401, 'revoked_credential');
      await lab.expectAccepted(b.key, b.id);
      await lab.expectAccepted(c.key, c.id);
      const chain = (await lab.list()).filter((record) => [a.id, b.id, c.id].includes(record.id) || [a.id, b.id, c.id].includes(record.rotated_from));
      expect(chain.map((record) => record.id).sort((x, y) => x - y)).toEqual([a.id, b.id, c.id]);
      expect(chain.filter((record) => record.is_active).map((record) => record.id).sort((x, y) => x - y)).toEqual([b.id, c.id]);
      expect((await lab.auditOf(b.id)).filter((event) => event.action === 'key_rotated').map((event) => event.detail)).toEqual([{ from: b.id, to: c.id, grace_seconds: 3600, revoked: [a.id] }]);
    });

    it('rotating A and B of one chain at once never leaves three live keys', async () => {
      for (let round = 0; round < 4; round++) {
        const a = await lab.create({ name: `pair ${round}` });
        const b = (await lab.rotate(a.id, { grace_seconds: 3600 })).body;
        const [fromA, fromB] = await Promise.all([lab.rotate(a.id, { grace_seconds: 3600 }), lab.rotate(b.id, { grace_seconds: 3600 })]);
        // A is rotated already; once B's rotation is in, it is revoked too (revocation is answered first).
        expect(fromA.status).toBe(409);
        expect(['key_rotated', 'key_revoked']).toContain(fromA.body.code);
        expect(fromB.status).toBe(201);
        const live = [];
        for (const [key, id] of [[a.key, a.id], [b.key, b.id], [fromB.body.key, fromB.body.id]] as const) {
          if ((await lab.call(key)).response.status === 200) live.push(id);
        }
        expect(live).toEqual([b.id, fromB.body.id]);
      }
    });
  });
});
