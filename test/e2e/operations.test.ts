import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendChecksum, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG } from '../../src/credentials/key-format.ts';
import { ADMIN_PASSWORD } from '../support/gateway-process.ts';
import { request } from '../support/http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).error === undefined;
const required = process.env['REQUIRE_SERVICES'] === '1';

/** The value of one sample line of a scrape, or undefined when the series is absent. */
function sample(body: string, series: string): number | undefined {
  const line = body.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** The sum of every sample of a family whose name and labels contain all of `parts`. */
function total(body: string, name: string, ...parts: string[]): number {
  return body
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => parts.every((part) => line.includes(part)))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

describe('operations: metrics after real traffic, health, request ids, logs without secrets', () => {
  let f: ProxyFixture;
  let key: string;
  let keyId: number;
  let scrape: string;

  beforeAll(async () => {
    f = await startProxyFixture();
    ({ key, id: keyId } = await f.key({ scopes: ['events:write'], agent_id: 3 }));
    // Real traffic: allowed, denied, a failed login, a wrong key, a revoke.
    for (let i = 0; i < 3; i++) await request(`${f.gateway.url}/api/v1/agents/3/events`, { method: 'POST', token: key, json: { i } });
    await request(`${f.gateway.url}/api/v1/agents/4/events`, { method: 'POST', token: key, json: {} });
    await request(`${f.gateway.url}/api/v1/agents/3/events`, { method: 'POST', json: {} });
    await request(`${f.gateway.url}/dashboard`, { token: f.admin });
    await request(`${f.gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: 'ops@example.test', password: 'wrong password' } });
    // Well-formed (checksum right) behind the prefix of a key never used here (one that is cached
    // would be refused from memory), so it costs one argon2id verify and fails it.
    const unused = await f.key({ scopes: ['events:write'] });
    const forged = appendChecksum(unused.key.slice(0, KEY_PREFIX_LENGTH) + 'x'.repeat(KEY_TAG.length + KEY_BODY_LENGTH - KEY_PREFIX_LENGTH));
    await request(`${f.gateway.url}/api/v1/agents/3/events`, { method: 'POST', token: forged, json: {} });
    const revoked = await f.key({ scopes: ['events:write'] });
    await request(`${f.gateway.url}/api/v1/agents/3/events`, { method: 'POST', token: revoked.key, json: {} });
    await request(`${f.gateway.url}/api/v1/api-keys/${revoked.id}`, { method: 'DELETE', token: f.admin });
    await request(`${f.gateway.url}/api/v1/agents/3/events`, { method: 'POST', token: revoked.key, json: {} });
    scrape = await (await fetch(`${f.gateway.opsUrl}/metrics`)).text();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('serves /metrics on OPS_PORT only', async () => {
    // On the public port /metrics is just another admin path: proxied to the upstream, never served.
    const publicPort = await fetch(`${f.gateway.url}/metrics`, { headers: { authorization: `Bearer ${f.admin}` } });
    expect(publicPort.headers.get('x-origin')).toBe('yes');
    expect((await fetch(`${f.gateway.url}/metrics`)).status).toBe(401);
    expect(scrape).toContain('# TYPE gatehouse_decisions_total counter');
  });

  it('counts decisions by outcome, reason, credential and route', () => {
    expect(total(scrape, 'gatehouse_decisions_total', 'outcome="allow"', 'credential="api_key"', 'route="events"')).toBeGreaterThanOrEqual(4);
    expect(total(scrape, 'gatehouse_decisions_total', 'reason="agent_mismatch"', 'route="events"')).toBe(1);
    expect(total(scrape, 'gatehouse_decisions_total', 'reason="missing_credential"')).toBe(1);
    expect(total(scrape, 'gatehouse_decisions_total', 'reason="revoked_credential"')).toBe(1);
    expect(total(scrape, 'gatehouse_decisions_total', 'outcome="allow"', 'credential="admin"', 'route="admin"')).toBe(1);
    expect(total(scrape, 'gatehouse_decision_duration_seconds_count', 'route="events"')).toBeGreaterThan(0);
    expect(total(scrape, 'gatehouse_upstream_duration_seconds_count', 'route="events"', 'status_class="2xx"')).toBeGreaterThanOrEqual(4);
  });

  it('counts cache lookups, argon2id verifies, logins, keys by status; fail-open stays 0', () => {
    expect(total(scrape, 'gatehouse_cache_lookups_total', 'tier="identity"', 'result="hit"')).toBeGreaterThan(0);
    expect(total(scrape, 'gatehouse_cache_lookups_total', 'tier="identity"', 'result="miss"')).toBeGreaterThan(0);
    expect(total(scrape, 'gatehouse_argon2_verifications_total', 'result="match"')).toBeGreaterThanOrEqual(2);
    expect(total(scrape, 'gatehouse_argon2_verifications_total', 'result="mismatch"')).toBe(1);
    expect(total(scrape, 'gatehouse_logins_total', 'result="success"')).toBe(1);
    expect(total(scrape, 'gatehouse_logins_total', 'result="failure"')).toBe(1);
    expect(sample(scrape, 'gatehouse_api_keys{status="active"}')).toBe(2); // the key used, and the one whose prefix was forged
    expect(sample(scrape, 'gatehouse_api_keys{status="revoked"}')).toBe(1);
    expect(sample(scrape, 'gatehouse_fail_open_decisions_total')).toBe(0);
    expect(scrape).toMatch(/^gatehouse_build_info\{version="[^"]+"\} 1$/m);
    expect(scrape).toMatch(/^gatehouse_nodejs_eventloop_lag_seconds /m);
    expect(scrape).toMatch(/^gatehouse_process_resident_memory_bytes /m);
  });

  it('never puts a key id, email or raw path in a label', () => {
    expect(scrape).not.toMatch(new RegExp(`[^e]="${keyId}"`)); // only le="1" may carry the id's digits
    expect(scrape).not.toContain('example.test');
    expect(scrape).not.toContain('/api/v1/agents');
    expect(scrape).not.toContain('ghk_');
  });

  it.skipIf(!promtool && !required)('passes promtool check metrics', () => {
    expect(promtool, 'promtool missing: apt-get install prometheus').toBe(true);
    const result = spawnSync('promtool', ['check', 'metrics'], { input: scrape, encoding: 'utf8' });
    expect(`${result.stdout}${result.stderr}`.trim()).toBe('');
    expect(result.status).toBe(0);
  });

  it('answers /healthz and /readyz with detail', async () => {
    const health = await request(`${f.gateway.opsUrl}/healthz`);
    expect(health.status).toBe(200);
    expect(health.body).toMatchObject({ status: 'ok' });
    const ready = await request(`${f.gateway.opsUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ready', checks: { store: { status: 'ok', kind: 'embedded' }, migrations: { status: 'ok' } } });
    expect((await fetch(`${f.gateway.url}/healthz`, { headers: { authorization: `Bearer ${f.admin}` } })).headers.get('x-origin')).toBe('yes');
  });

  it('accepts a plain x-request-id, returns it and passes it upstream; replaces a hostile one', async () => {
    f.origin.clear();
    const response = await request(`${f.gateway.url}/api/v1/agents/3/events`, {
      method: 'POST',
      token: key,
      json: {},
      headers: { 'x-request-id': 'trace-abc.123' },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toBe('trace-abc.123');
    expect(f.origin.received[0]?.headers['x-request-id']).toBe('trace-abc.123');
    const hostile = await request(`${f.gateway.url}/api/v1/agents/3/events`, {
      method: 'POST',
      token: key,
      json: {},
      headers: { 'x-request-id': 'a b\t<script>' },
    });
    expect(hostile.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const refused = await request(`${f.gateway.url}/api/v1/agents/3/events`, { method: 'POST', json: {} });
    expect(refused.body.instance).toBe(refused.headers.get('x-request-id'));
  });

  it('logs one line per denial with its code, and never a raw key, password or token', () => {
    const lines = f.gateway
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const denials = lines.filter((line) => line['msg'] === 'request refused');
    expect(denials.map((line) => line['code'])).toEqual(expect.arrayContaining(['agent_mismatch', 'missing_credential', 'revoked_credential', 'invalid_credential']));
    expect(denials.every((line) => typeof line['reqId'] === 'string')).toBe(true);
    const output = f.gateway.output();
    expect(output).not.toContain(key);
    expect(output).not.toContain(key.slice(12));
    expect(output).not.toContain(f.admin);
    expect(output).not.toContain(f.admin.split('.')[2]);
    expect(output).not.toContain(ADMIN_PASSWORD);
    expect(output).not.toContain('wrong password');
  });
});
