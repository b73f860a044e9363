import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import WebSocket from 'ws';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { REPO_ROOT, runGateway, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { rateLimitField } from '../support/rate-limit-fields.ts';
import { EVENTS_PATH, metric } from '../support/replicas.ts';

/**
 * Rate limits on one gateway (docs/api-keys.md, "Rate limits"), tried as an operator would:
 * keys created and changed through the API, calls counted by what the upstream received.
 */
describe('rate limits on one gateway (no Redis: the count of this process)', () => {
  let origin: Origin;
  let gateway: GatewayProcess;
  let admin: string;

  beforeAll(async () => {
    origin = await startOrigin();
    gateway = await startGateway({ UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
    admin = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway.stop();
    await origin.close();
  });
  beforeEach(() => origin.clear());

  const newKey = async (fields: Record<string, unknown>) => {
    const created = await createKey(gateway.url, admin, { name: 'limited', ...fields });
    expect(created.status).toBe(201);
    return created.body as { id: number; key: string; rate_limit: unknown };
  };
  const post = (key: string, path = EVENTS_PATH) => request(`${gateway.url}${path}`, { method: 'POST', token: key, json: { type: 'call.started' } });
  const patch = (id: number, json: unknown) => request(`${gateway.url}/api/v1/api-keys/${id}`, { method: 'PATCH', token: admin, json });

  it('a key with 10/1m: ten calls forwarded, each telling what is left; the 11th refused 429 with Retry-After, nothing forwarded', async () => {
    const { key, rate_limit } = await newKey({ rate_limit: { requests: 10, per_seconds: 60 } });
    expect(rate_limit).toEqual({ requests: 10, per_seconds: 60 });
    for (let i = 0; i < 10; i++) {
      const answer = await post(key);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('ratelimit-policy')).toBe('"key";q=10;w=60');
      expect(answer.headers.get('ratelimit')).toMatch(new RegExp(`^"key";r=${9 - i};t=\\d+$`));
      // t never over w (a fractional clock once rounded it to 61 on this 60 s limit).
      expect(rateLimitField(answer.headers)).toMatchObject({ q: 10, w: 60, r: 9 - i });
    }
    const refused = await post(key);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(refused.body).toMatchObject({ code: 'rate_limited', status: 429, detail: "The API key's rate limit is reached (10 per 60 s)" });
    // The first of the ten leaves the interval 60 s after it was counted: no sooner, and no later than w.
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('ratelimit')).toBe(`"key";r=0;t=${retryAfter}`);
    expect(rateLimitField(refused.headers)).toEqual({ q: 10, w: 60, r: 0, t: retryAfter });
    expect(refused.headers.get('ratelimit-policy')).toBe('"key";q=10;w=60');
    expect(refused.headers.get('www-authenticate')).toBeNull();
    expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(10);
    // The gateway's own fields, never the client's, reach nobody upstream either.
    expect(origin.received.every((received) => received.headers.ratelimit === undefined)).toBe(true);
  });

  it('concurrent calls past the limit: exactly the limit forwarded', async () => {
    const { key } = await newKey({ rate_limit: { requests: 10, per_seconds: 60 } });
    const answers = await Promise.all(Array.from({ length: 40 }, () => post(key)));
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(10);
    expect(answers.filter((answer) => answer.status === 429)).toHaveLength(30);
    expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(10);
  });

  it('PATCH changes the limit before its answer: raised, the next call passes; removed, no limit and no fields', async () => {
    const { id, key } = await newKey({ rate_limit: { requests: 1, per_seconds: 60 } });
    expect((await post(key)).status).toBe(200);
    expect((await post(key)).status).toBe(429);
    const raised = await patch(id, { rate_limit: { requests: 3, per_seconds: 60 } });
    expect(raised.status).toBe(200);
    expect(raised.body.rate_limit).toEqual({ requests: 3, per_seconds: 60 });
    const next = await post(key);
    expect(next.status).toBe(200);
    // What was counted before the change still counts: two of three used.
    expect(next.headers.get('ratelimit')).toMatch(/^"key";r=1;/);
    expect((await patch(id, { rate_limit: null })).body.rate_limit).toBeNull();
    for (let i = 0; i < 5; i++) {
      const free = await post(key);
      expect(free.status).toBe(200);
      expect(free.headers.get('ratelimit')).toBeNull();
    }
    expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(7);
  });

  it('a key without a limit: no RateLimit fields', async () => {
    const { key } = await newKey({});
    const answer = await post(key);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('ratelimit')).toBeNull();
    expect(answer.headers.get('ratelimit-policy')).toBeNull();
  });

  it('a refusal by another rule counts nothing and still tells the limit', async () => {
    const { key } = await newKey({ rate_limit: { requests: 2, per_seconds: 60 }, agent_id: 5 });
    for (let i = 0; i < 4; i++) {
      const refused = await post(key, '/api/v1/agents/6/events');
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('agent_mismatch');
      expect(refused.headers.get('ratelimit')).toBe('"key";r=2;t=0');
    }
    expect((await post(key, '/api/v1/agents/5/events')).status).toBe(200);
    expect(origin.received).toHaveLength(1);
  });

  it('counts refusals in gatehouse_rate_limited_total{limit="key"}', async () => {
    const before = await metric(gateway, 'gatehouse_rate_limited_total', { limit: 'key' });
    const { key } = await newKey({ rate_limit: { requests: 1, per_seconds: 60 } });
    await post(key);
    await post(key);
    await post(key);
    expect(await metric(gateway, 'gatehouse_rate_limited_total', { limit: 'key' })).toBe(before + 2);
    expect(await metric(gateway, 'gatehouse_rate_limit_fallback_total')).toBe(0);
  });

  it.each([
    ['zero requests', { requests: 0, per_seconds: 60 }, 'rate_limit.requests'],
    ['more than a million', { requests: 1_000_001, per_seconds: 60 }, 'rate_limit.requests'],
    ['a fraction', { requests: 2.5, per_seconds: 60 }, 'rate_limit.requests'],
    ['a number as a string', { requests: '10', per_seconds: 60 }, 'rate_limit.requests'],
    ['a negative interval', { requests: 10, per_seconds: -60 }, 'rate_limit.per_seconds'],
    ['more than a day', { requests: 10, per_seconds: 86_401 }, 'rate_limit.per_seconds'],
    ['a burst of its own', { requests: 10, per_seconds: 60, burst: 100 }, 'rate_limit'],
    ['the CLI\'s text', '10/1m', 'rate_limit'],
    ['an array', [10, 60], 'rate_limit'],
  ])('refuses a rate limit of %s on create and on PATCH: 400 naming the field, nothing stored', async (_what, rateLimit, field) => {
    const before = (await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body.length as number;
    const created = await createKey(gateway.url, admin, { name: 'bad', rate_limit: rateLimit });
    expect(created.status).toBe(400);
    expect(created.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(created.body.code).toBe('validation_failed');
    expect(created.body.errors.map((error: { field: string }) => error.field)).toContain(field);
    expect((await request(`${gateway.url}/api/v1/api-keys`, { token: admin })).body).toHaveLength(before);
    const { id } = await newKey({ rate_limit: { requests: 5, per_seconds: 60 } });
    const changed = await patch(id, { rate_limit: rateLimit });
    expect(changed.status).toBe(400);
    expect(changed.body.errors.map((error: { field: string }) => error.field)).toContain(field);
    expect((await request(`${gateway.url}/api/v1/api-keys/${id}`, { token: admin })).body.rate_limit).toEqual({ requests: 5, per_seconds: 60 });
  });

  it('a WebSocket upgrade counts as a request, and its 101 tells the limit', async () => {
    const { key } = await newKey({ rate_limit: { requests: 1, per_seconds: 60 } });
    const upgrade = () =>
      new Promise<{ status: number; ratelimit: string | undefined; headers: Headers }>((resolve, reject) => {
        const socket = new WebSocket(`${gateway.url.replace('http:', 'ws:')}${EVENTS_PATH}`, { headers: { authorization: `Bearer ${key}` } });
        socket.once('upgrade', (response) => {
          resolve({ status: 101, ratelimit: response.headers.ratelimit as string | undefined, headers: fieldsOf(response.headers) });
          socket.close();
        });
        socket.once('unexpected-response', (_request, response) => {
          resolve({ status: response.statusCode!, ratelimit: response.headers.ratelimit as string | undefined, headers: fieldsOf(response.headers) });
          socket.terminate();
        });
        socket.once('error', reject);
      });
    const first = await upgrade();
    expect(first).toMatchObject({ status: 101, ratelimit: expect.stringMatching(/^"key";r=0;t=\d+$/) });
    expect(rateLimitField(first.headers)).toMatchObject({ q: 1, w: 60, r: 0 });
    const second = await upgrade();
    expect(second).toMatchObject({ status: 429, ratelimit: expect.stringMatching(/^"key";r=0;t=\d+$/) });
    expect(rateLimitField(second.headers)).toMatchObject({ q: 1, w: 60, r: 0 });
    expect(origin.received.filter((received) => received.body === 'websocket')).toHaveLength(1);
  });

  it('a client cannot spoof the fields or slip past the count with headers of its own', async () => {
    const { key } = await newKey({ rate_limit: { requests: 1, per_seconds: 60 } });
    const spoof = { ratelimit: '"key";r=100;t=0', 'ratelimit-policy': '"key";q=1000;w=1', 'x-forwarded-for': '198.51.100.7', 'x-ratelimit-remaining': '100' };
    const first = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: {}, headers: spoof });
    expect(first.headers.get('ratelimit')).toMatch(/^"key";r=0;/);
    const second = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: {}, headers: spoof });
    expect(second.status).toBe(429);
    expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(1);
  });
});

/** The RateLimit fields of a WebSocket handshake's answer, as fetch's Headers. */
function fieldsOf(headers: Record<string, string | string[] | undefined>): Headers {
  const fields = new Headers();
  for (const name of ['ratelimit-policy', 'ratelimit']) if (typeof headers[name] === 'string') fields.set(name, headers[name]);
  return fields;
}

describe('DEFAULT_KEY_RATE_LIMIT', () => {
  let gateway: GatewayProcess;
  let admin: string;

  beforeAll(async () => {
    gateway = await startGateway({ DEFAULT_KEY_RATE_LIMIT: '600/1m', LOG_LEVEL: 'warn' });
    admin = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway.stop();
  });

  it.each([
    ['names none: gets the default', {}, { requests: 600, per_seconds: 60 }],
    ['names one: keeps it', { rate_limit: { requests: 5, per_seconds: 1 } }, { requests: 5, per_seconds: 1 }],
    ['names none explicitly (null): has none', { rate_limit: null }, null],
  ])('a new key that %s', async (_what, fields, expected) => {
    const created = await createKey(gateway.url, admin, { name: 'defaulted', ...fields });
    expect(created.status).toBe(201);
    expect(created.body.rate_limit).toEqual(expected);
    expect((await request(`${gateway.url}/api/v1/api-keys/${created.body.id}`, { token: admin })).body.rate_limit).toEqual(expected);
  });
});

describe('rate limit settings that stop the start, naming what is wrong', () => {
  it.each([
    ['600', /^gatehouse: DEFAULT_KEY_RATE_LIMIT: '600' is not N\/DURATION/m],
    ['0/1m', /^gatehouse: DEFAULT_KEY_RATE_LIMIT: requests must be 1 to 1,000,000/m],
    ['10/2d', /^gatehouse: DEFAULT_KEY_RATE_LIMIT: the duration must be 1 s to 24 h/m],
  ])('DEFAULT_KEY_RATE_LIMIT=%s', async (value, line) => {
    const { code, output } = await runGateway({ DEFAULT_KEY_RATE_LIMIT: value });
    expect(code).toBe(1);
    expect(output).toMatch(line);
  });

  it('a tool limit for a tool the table does not list', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-limits-'));
    const tools = parse(readFileSync(join(REPO_ROOT, 'config/mcp-tools.yaml'), 'utf8')) as Record<string, unknown>;
    writeFileSync(join(dir, 'mcp-tools.yaml'), stringify({ ...tools, limits: { place_outbound_calls: { requests: 10, per_seconds: 60 } } }));
    writeFileSync(join(dir, 'routes.yaml'), readFileSync(join(REPO_ROOT, 'config/routes.yaml')));
    const { code, output } = await runGateway({ CONFIG_DIR: dir });
    expect(code).toBe(1);
    expect(output).toMatch(/^gatehouse: CONFIG_DIR: .*mcp-tools\.yaml: limits\.place_outbound_calls: "place_outbound_calls" is not a tool of this table/m);
  });
});
