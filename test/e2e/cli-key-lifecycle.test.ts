/* eslint-disable @typescript-eslint/no-explicit-any -- CLI and HTTP answers are read as loosely typed JSON */
import { until } from '../support/until.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../support/cli-process.ts';
import { startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { createTestDatabase, describeWithPostgres, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';

/** `gatehouse keys show|update|rotate` (issue 24): the key lifecycle of the HTTP API, on the configured store. */

const OK = 0;
const REFUSED = 1;
const USAGE = 2;
const RAW_KEY = /ghk_[A-Za-z0-9]{46}/;
const DAY_MS = 86_400_000;

/** `keys create --json` on `env`: the record with its raw key. */
async function created(env: Record<string, string>, ...args: string[]): Promise<any> {
  const result = await runCli(['keys', 'create', '--name', 'lifecycle', ...args, '--json'], env);
  expect(result.code, result.stderr).toBe(OK);
  return result.json();
}

async function shown(env: Record<string, string>, id: number): Promise<any> {
  const result = await runCli(['keys', 'show', String(id), '--json'], env);
  expect(result.code, result.stderr).toBe(OK);
  return result.json();
}

function expectRefused(result: CliResult, code: string, message?: RegExp): void {
  expect(result.code, result.stderr).toBe(REFUSED);
  expect(result.json<any>().error.code).toBe(code);
  expect(result.stderr).toMatch(/^gatehouse: .+\n$/);
  if (message) expect(result.stderr).toMatch(message);
}

describe('gatehouse keys show|update|rotate: usage', () => {
  it.each([
    { args: ['keys', 'show'], message: /missing argument/ },
    { args: ['keys', 'show', '01'], message: /positive integer, got '01'/ },
    { args: ['keys', 'update', '--name', 'x'], message: /missing argument/ },
    { args: ['keys', 'update', '1'], message: /nothing to change: give at least one of --name, --scope/ },
    { args: ['keys', 'update', '1', '--json'], message: /nothing to change/ },
    { args: ['keys', 'update', '1', '--agent-id', '7', '--no-agent'], message: /--agent-id and --no-agent cannot be used together/ },
    { args: ['keys', 'update', '1', '--expires-at', '2099-01-01T00:00:00Z', '--no-expiry'], message: /--expires-at and --no-expiry cannot/ },
    { args: ['keys', 'update', '1', '--rate-limit', '1/1s', '--no-rate-limit'], message: /--rate-limit and --no-rate-limit cannot/ },
    { args: ['keys', 'update', '1', '--disable', '--enable'], message: /--disable and --enable cannot be used together/ },
    { args: ['keys', 'update', '1', '--no-agent=yes'], message: /no-agent/ },
    { args: ['keys', 'update', '1', '--rate-limit', 'fast'], message: /--rate-limit: 'fast' is not N\/DURATION/ },
    { args: ['keys', 'update', '1', '--rate-limit', '100'], message: /--rate-limit: '100' is not N\/DURATION/ },
    { args: ['keys', 'update', '1', '--rate-limit', '100/'], message: /is not N\/DURATION/ },
    { args: ['keys', 'update', '1', '--rate-limit', '/1m'], message: /is not N\/DURATION/ },
    { args: ['keys', 'update', '1', '--rate-limit', '100/1w'], message: /'1w' is not a duration/ },
    { args: ['keys', 'update', '1', '--rate-limit', '100/1500ms'], message: /'1500ms' is not a whole number of seconds/ },
    { args: ['keys', 'rotate'], message: /missing argument/ },
    { args: ['keys', 'rotate', '1', '--grace', 'soon'], message: /--grace: 'soon' is not a duration/ },
    { args: ['keys', 'rotate', '1', '--grace', '-1h'], message: /grace/ },
    { args: ['keys', 'rotate', '1', '2'], message: /unexpected argument '2'/ },
  ])('exits 2 on $args, saying why, before opening the store', async ({ args, message }) => {
    // An unopenable store: a usage error must not need one.
    const result = await runCli(args, { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(result.code, result.stderr).toBe(USAGE);
    expect(result.stderr).toMatch(message);
    expect(result.stderr).toContain('--help');
  });

  it('documents the three commands in the keys group', async () => {
    const group = await runCli(['keys', '--help']);
    expect(group.stdout).toMatch(/keys show[\s\S]*keys update[\s\S]*keys rotate/);
    const update = await runCli(['keys', 'update', '--help']);
    for (const flag of ['--no-agent', '--no-expiry', '--rate-limit', '--no-rate-limit', '--disable', '--enable']) expect(update.stdout).toContain(flag);
  });
});

// Each command is a Node process of its own: the tests that run several take their time.
describe('gatehouse keys show|update|rotate on the embedded store', { timeout: 120_000 }, () => {
  const env = { DATA_DIR: tempDataDir() };

  it('shows a key as GET /api/v1/api-keys/{id} does, never its raw key', async () => {
    const { key, ...record } = await created(env, '--agent-id', '7');
    const json = await runCli(['keys', 'show', String(record.id), '--json'], env);
    expect(json.code).toBe(OK);
    expect(json.json()).toEqual(record);
    const plain = await runCli(['keys', 'show', String(record.id)], env);
    expect(plain.code).toBe(OK);
    expect(plain.stdout).toMatch(new RegExp(`^id\\s+${record.id}$`, 'm'));
    expect(plain.stdout).toMatch(/^status\s+active$/m);
    expect(plain.stdout).toMatch(/^agent_id\s+7$/m);
    expect(plain.stdout).toMatch(/^rate_limit\s+none$/m);
    expect(plain.stdout + plain.stderr + json.stdout + json.stderr).not.toContain(key);
  });

  it('changes each field, and the store holds it', async () => {
    const { id } = await created(env, '--agent-id', '7');
    const expiresAt = new Date(Date.now() + 30 * DAY_MS).toISOString();
    const all = await runCli(
      ['keys', 'update', String(id), '--name', ' renamed ', '--scope', 'mcp:agents', '--scope', 'events:write', '--scope', 'mcp:agents',
        '--agent-id', '9', '--expires-at', expiresAt, '--rate-limit', '100/1m', '--disable', '--json'],
      env,
    );
    expect(all.code, all.stderr).toBe(OK);
    const expected = {
      id,
      name: 'renamed',
      scopes: ['mcp:agents', 'events:write'],
      agent_id: 9,
      expires_at: expiresAt,
      rate_limit: { requests: 100, per_seconds: 60 },
      enabled: false,
      status: 'disabled',
      is_active: false,
    };
    expect(all.json()).toMatchObject(expected);
    expect(await shown(env, id)).toEqual(all.json());

    const plain = await runCli(['keys', 'update', String(id), '--no-agent', '--no-expiry', '--rate-limit', '5/s'], env);
    expect(plain.code, plain.stderr).toBe(OK);
    expect(plain.stdout).toBe(`updated API key ${id} "renamed" (${all.json<any>().key_prefix}…, mcp:agents events:write, any agent, never expires, 5 request(s) per 1s, disabled)\n`);
    expect(await shown(env, id)).toMatchObject({ agent_id: null, expires_at: null, rate_limit: { requests: 5, per_seconds: 1 }, enabled: false });

    expect((await runCli(['keys', 'update', String(id), '--no-rate-limit', '--enable'], env)).code).toBe(OK);
    const after = await shown(env, id);
    expect(after).toMatchObject({ ...expected, agent_id: null, expires_at: null, rate_limit: null, enabled: true, status: 'active', is_active: true });
    expect(Date.parse(after.updated_at)).toBeGreaterThan(Date.parse(after.created_at));

    // Nothing to change: said so, and nothing is stored.
    const again = await runCli(['keys', 'update', String(id), '--enable'], env);
    expect(again.stdout).toMatch(/^unchanged API key /);
    expect((await shown(env, id)).updated_at).toBe(after.updated_at);
  });

  it.each([
    { args: ['--rate-limit', '0/1m'], field: 'rate_limit.requests', message: />=1/ },
    { args: ['--rate-limit', '1000001/1s'], field: 'rate_limit.requests', message: /<=1000000/ },
    { args: ['--rate-limit', '10/0s'], field: 'rate_limit.per_seconds', message: />=1/ },
    { args: ['--rate-limit', '10/2d'], field: 'rate_limit.per_seconds', message: /<=86400/ },
    { args: ['--scope', 'teleport'], field: 'scopes.0', message: /unknown scope/ },
    { args: ['--scope', 'mcp:*'], field: 'scopes.0', message: /wildcard/ },
    { args: ['--name', '  '], field: 'name', message: /empty/ },
    { args: ['--agent-id', '0'], field: 'agent_id', message: /positive/ },
    { args: ['--agent-id', 'seven'], field: 'agent_id', message: /number/ },
    { args: ['--expires-at', '2020-01-01T00:00:00Z'], field: 'expires_at', message: /future/ },
    { args: ['--expires-at', '2030-01-01'], field: 'expires_at', message: /ISO 8601/ },
  ])('refuses $args as PATCH does (exit 1, $field), and changes nothing', async ({ args, field, message }) => {
    const { key: _key, ...record } = await created(env);
    const result = await runCli(['keys', 'update', String(record.id), ...args, '--json'], env);
    expectRefused(result, 'validation_failed');
    expect(result.json<any>().error.errors).toContainEqual({ field, message: expect.stringMatching(message) });
    expect(await shown(env, record.id)).toEqual(record);
  });

  it('refuses an unknown id (not_found) and a revoked key (key_revoked); a rotated key\'s expiry only moves earlier', async () => {
    for (const args of [['show', '999'], ['update', '999', '--disable'], ['rotate', '999']]) {
      expectRefused(await runCli(['keys', ...args, '--json'], env), 'not_found', /^gatehouse: No API key with id 999\n$/);
    }
    const revoked = await created(env);
    expect((await runCli(['keys', 'revoke', String(revoked.id)], env)).code).toBe(OK);
    expectRefused(await runCli(['keys', 'update', String(revoked.id), '--enable', '--json'], env), 'key_revoked', /is revoked/);
    expectRefused(await runCli(['keys', 'rotate', String(revoked.id), '--json'], env), 'key_revoked');
    expect((await runCli(['keys', 'show', String(revoked.id)], env)).code).toBe(OK);

    const old = await created(env);
    expect((await runCli(['keys', 'rotate', String(old.id), '--grace', '1h'], env)).code).toBe(OK);
    expectRefused(await runCli(['keys', 'rotate', String(old.id), '--json'], env), 'key_rotated', /rotate its successor/);
    expectRefused(await runCli(['keys', 'update', String(old.id), '--no-expiry', '--json'], env), 'key_rotated');
    const sooner = new Date(Date.now() + 60_000).toISOString();
    expect((await runCli(['keys', 'update', String(old.id), '--expires-at', sooner], env)).code).toBe(OK);
    expect((await shown(env, old.id)).expires_at).toBe(sooner);
  });

  it('refuses to rotate an expired key (key_expired)', async () => {
    // Far enough ahead that the CLI, started on a loaded machine, still finds it in the future.
    const expiresAt = new Date(Date.now() + 8_000).toISOString();
    const { id } = await created(env, '--expires-at', expiresAt);
    // The CLI reads the wall clock: wait until the key shows as expired, then rotate it.
    await until(async () => (await shown(env, id)).status === 'expired', 'the key to expire');
    expectRefused(await runCli(['keys', 'rotate', String(id), '--json'], env), 'key_expired', /has expired/);
  });

  it('rotates with the default grace of a day: the new key printed once on stdout, the records linked', async () => {
    const old = await created(env, '--agent-id', '7', '--scope', 'mcp:agents');
    await runCli(['keys', 'update', String(old.id), '--rate-limit', '10/1h'], env);
    const before = Date.now();
    const result = await runCli(['keys', 'rotate', String(old.id)], env);
    expect(result.code, result.stderr).toBe(OK);
    expect(result.stdout).toMatch(new RegExp(`^${RAW_KEY.source}\\n$`));
    const key = result.stdout.trim();
    expect(result.stderr).not.toMatch(RAW_KEY);
    expect(result.stderr).toContain('shown only this once');
    expect(result.stderr).toMatch(new RegExp(`^rotated API key ${old.id} into \\d+ "lifecycle"`));
    expect(result.stderr).toMatch(new RegExp(`the old key ${old.id} keeps working until `));

    const replaced = await shown(env, old.id);
    const successor = await shown(env, replaced.rotated_to);
    expect(successor).toMatchObject({
      rotated_from: old.id,
      rotated_to: null,
      key_prefix: key.slice(0, 12),
      name: 'lifecycle',
      agent_id: 7,
      scopes: ['mcp:agents'],
      rate_limit: { requests: 10, per_seconds: 3600 },
      status: 'active',
    });
    expect(replaced).toMatchObject({ status: 'active', rotated_to: successor.id });
    expect(Date.parse(replaced.expires_at) - before).toBeGreaterThanOrEqual(DAY_MS - 1000);
    expect(Date.parse(replaced.expires_at) - Date.now()).toBeLessThanOrEqual(DAY_MS);
    expect((await runCli(['keys', 'list'], env)).stdout).not.toContain(key);
  });

  it('rotates with --grace 0 (the old key revoked at once) and --json; a third key revokes the first one\'s grace', async () => {
    const first = await created(env);
    const second = await runCli(['keys', 'rotate', String(first.id), '--grace', '2h', '--json'], env);
    expect(second.code, second.stderr).toBe(OK);
    const secondRecord = second.json<any>();
    expect(secondRecord).toMatchObject({ rotated_from: first.id, status: 'active', key: expect.stringMatching(RAW_KEY) });
    expect(second.stderr).not.toContain(secondRecord.key);
    expect(Date.parse((await shown(env, first.id)).expires_at)).toBeGreaterThan(Date.now() + 7_100_000);

    const third = await runCli(['keys', 'rotate', String(secondRecord.id), '--grace', '0'], env);
    expect(third.code, third.stderr).toBe(OK);
    expect(third.stderr).toContain(`the old key ${secondRecord.id} is revoked (no grace period)`);
    expect((await shown(env, secondRecord.id)).status).toBe('revoked');
    // At most two live keys in a chain: the first one's grace ends with the next rotation.
    expect((await shown(env, first.id)).status).toBe('revoked');

    expectRefused(await runCli(['keys', 'rotate', String(first.id), '--grace', '31d', '--json'], env), 'validation_failed', /grace_seconds/);
  });

  it('holds the licence cap when enabling a key; a disabled key still counts', async () => {
    const capped = { DATA_DIR: tempDataDir(), LICENSE_API_KEYS: '2' };
    const a = await created(capped);
    await created(capped);
    expect((await runCli(['keys', 'update', String(a.id), '--disable'], capped)).code).toBe(OK);
    expectRefused(await runCli(['keys', 'create', '--name', 'third', '--json'], capped), 'license_limit');
    const lowered = { ...capped, LICENSE_API_KEYS: '1' };
    expectRefused(await runCli(['keys', 'update', String(a.id), '--enable', '--json'], lowered), 'license_limit', /^gatehouse: The licence allows 1 /);
    expect((await shown(capped, a.id)).enabled).toBe(false);
    expect((await runCli(['keys', 'update', String(a.id), '--enable'], capped)).code).toBe(OK);
  });

  it('a gateway started on the store refuses the disabled key and shows the CLI\'s audit trail, without a raw key', async () => {
    const disabled = await created(env, '--agent-id', '7');
    expect((await runCli(['keys', 'update', String(disabled.id), '--disable'], env)).code).toBe(OK);
    const gateway = await startGateway(env);
    try {
      const refused = await request(`${gateway.url}/api/v1/agents/7/events`, { method: 'POST', token: disabled.key, json: { type: 'ping' } });
      expect(refused.status).toBe(401);
      expect(refused.body).toMatchObject({ code: 'disabled_credential' });
      const token = await loginAdmin(gateway.url);
      const audit = await request(`${gateway.url}/api/v1/audit-events?limit=200`, { token });
      const actions = new Set(audit.body.filter((event: any) => event.actor_kind === 'cli').map((event: any) => event.action));
      for (const action of ['key_updated', 'key_disabled', 'key_enabled', 'key_rotated']) expect(actions).toContain(action);
      expect(audit.text).not.toMatch(RAW_KEY);
      expect(gateway.output()).not.toMatch(RAW_KEY);
    } finally {
      await gateway.stop();
    }
  });
});

describe('gatehouse keys create with a rate limit', { timeout: 120_000 }, () => {
  it.each([
    { args: ['--rate-limit', '10/1m', '--no-rate-limit'], message: /--rate-limit and --no-rate-limit cannot be used together/ },
    { args: ['--rate-limit', 'fast'], message: /--rate-limit: 'fast' is not N\/DURATION/ },
    { args: ['--rate-limit', '10/1w'], message: /'1w' is not a duration/ },
  ])('exits 2 on $args, before opening the store', async ({ args, message }) => {
    const result = await runCli(['keys', 'create', '--name', 'x', ...args], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(result.code, result.stderr).toBe(USAGE);
    expect(result.stderr).toMatch(message);
  });

  it('refuses a limit out of the API\'s bounds as the API does, creating nothing', async () => {
    const env = { DATA_DIR: tempDataDir() };
    expectRefused(await runCli(['keys', 'create', '--name', 'x', '--rate-limit', '0/1m', '--json'], env), 'validation_failed', /rate_limit\.requests/);
    expect((await runCli(['keys', 'list', '--json'], env)).json()).toEqual([]);
  });

  it('stores the limit; DEFAULT_KEY_RATE_LIMIT for a key that names none, --no-rate-limit for none; a gateway on the store enforces it', async () => {
    const env = { DATA_DIR: tempDataDir(), DEFAULT_KEY_RATE_LIMIT: '100/1h' };
    const own = await created(env, '--rate-limit', '2/1m');
    expect(own.rate_limit).toEqual({ requests: 2, per_seconds: 60 });
    expect((await created(env)).rate_limit).toEqual({ requests: 100, per_seconds: 3600 });
    expect((await created(env, '--no-rate-limit')).rate_limit).toBeNull();
    const plain = await runCli(['keys', 'create', '--name', 'plain', '--rate-limit', '5/s'], env);
    expect(plain.stderr).toMatch(/, 5 request\(s\) per 1s\)\n/);

    const origin = await startOrigin();
    const gateway = await startGateway({ ...env, UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await request(`${gateway.url}/api/v1/agents/1/events`, { method: 'POST', token: own.key, json: {} })).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect(origin.received).toHaveLength(2);
    } finally {
      await gateway.stop();
      await origin.close();
    }
  });
});

describeWithPostgres('gatehouse keys show|update|rotate beside a running gateway on PostgreSQL', () => {
  let database: TestDatabase;
  let gateway: GatewayProcess;
  let token: string;
  const cliEnv = () => ({ DATABASE_URL: database.url });

  beforeAll(async () => {
    database = await createTestDatabase();
    gateway = await startGateway({ DATABASE_URL: database.url });
    token = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
    await database?.drop();
  });

  it('shows, changes and rotates a key made over HTTP; the gateway\'s API reads what the CLI wrote', async () => {
    const viaApi = (await createKey(gateway.url, token, { name: 'from the api', agent_id: 7 })).body;
    const overHttp = async (id: number) => (await request(`${gateway.url}/api/v1/api-keys/${id}`, { token })).body;
    expect(await shown(cliEnv(), viaApi.id)).toEqual(await overHttp(viaApi.id));

    const updated = await runCli(['keys', 'update', String(viaApi.id), '--scope', 'mcp:agents', '--rate-limit', '30/1m', '--disable', '--json'], cliEnv());
    expect(updated.code, updated.stderr).toBe(OK);
    expect(await overHttp(viaApi.id)).toEqual(updated.json());
    expect(updated.json()).toMatchObject({ scopes: ['mcp:agents'], rate_limit: { requests: 30, per_seconds: 60 }, status: 'disabled' });

    const rotated = await runCli(['keys', 'rotate', String(viaApi.id), '--grace', '0', '--json'], cliEnv());
    expect(rotated.code, rotated.stderr).toBe(OK);
    const { key, ...successor } = rotated.json<any>();
    expect(await overHttp(successor.id)).toEqual(successor);
    expect(await overHttp(viaApi.id)).toMatchObject({ status: 'revoked', rotated_to: successor.id });
    expect(gateway.output()).not.toContain(key);

    expectRefused(await runCli(['keys', 'update', String(viaApi.id), '--enable', '--json'], cliEnv()), 'key_revoked');
    expectRefused(await runCli(['keys', 'show', '424242', '--json'], cliEnv()), 'not_found');
  });

  it('a key the CLI disabled before its first use is refused by the gateway: 401 disabled_credential', async () => {
    const record = await created(cliEnv(), '--agent-id', '7');
    expect((await runCli(['keys', 'update', String(record.id), '--disable'], cliEnv())).code).toBe(OK);
    const refused = await request(`${gateway.url}/api/v1/agents/7/events`, { method: 'POST', token: record.key, json: { type: 'ping' } });
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'disabled_credential' });
  });

  it('writes the lifecycle\'s audit events with actor_kind cli', async () => {
    const audit = await request(`${gateway.url}/api/v1/audit-events?limit=100`, { token });
    const trail = [...audit.body].reverse().map((event: any) => `${event.action}:${event.actor_kind}`);
    expect(trail).toEqual([
      'login_succeeded:admin',
      'key_created:admin',
      'key_disabled:cli',
      'key_updated:cli',
      'key_rotated:cli',
      'key_created:cli',
      'key_disabled:cli',
    ]);
  });
});

describe.skipIf(postgresUrl() === null || redisUrl() === null)('gatehouse keys update|rotate with REDIS_URL: running gateways apply the change at once', () => {
  let database: TestDatabase;
  let origin: Origin;
  let gateway: GatewayProcess;
  let token: string;
  const withRedis = () => ({ DATABASE_URL: database.url, REDIS_URL: redisUrl()! });

  beforeAll(async () => {
    database = await createTestDatabase();
    origin = await startOrigin();
    // A long cache TTL: only the revocation bus can make the gateway re-read a key it has cached.
    gateway = await startGateway({ DATABASE_URL: database.url, REDIS_URL: redisUrl()!, KEY_CACHE_TTL: '10m', UPSTREAM_URL: origin.url });
    token = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
    await database?.drop();
  });

  const useKey = (key: string) => request(`${gateway.url}/api/v1/agents/7/events`, { method: 'POST', token: key, json: { type: 'ping' } });
  const CONFIRMED = '1 of 1 running gateway(s) confirmed they dropped the key';

  it('--disable is in force when the command exits, --enable too', async () => {
    const { key, id } = (await createKey(gateway.url, token, { name: 'toggled', agent_id: 7 })).body;
    expect((await useKey(key)).status).toBe(200);

    const disabled = await runCli(['keys', 'update', String(id), '--disable'], withRedis());
    expect(disabled.code, disabled.stderr).toBe(OK);
    expect(disabled.stderr).toBe(`${CONFIRMED}\n`);
    const refused = await useKey(key);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'disabled_credential' });

    const enabled = await runCli(['keys', 'update', String(id), '--enable'], withRedis());
    expect(enabled.code, enabled.stderr).toBe(OK);
    expect(enabled.stderr).toContain(CONFIRMED);
    expect((await useKey(key)).status).toBe(200);
  });

  it('narrowed scopes are in force when the command exits: 403 insufficient_scope', async () => {
    const { key, id } = (await createKey(gateway.url, token, { name: 'narrowed', agent_id: 7 })).body;
    expect((await useKey(key)).status).toBe(200);
    expect((await runCli(['keys', 'update', String(id), '--scope', 'mcp:agents'], withRedis())).code).toBe(OK);
    const refused = await useKey(key);
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: 'insufficient_scope' });
  });

  it('rotate --grace 0: the old key is refused when the command exits, the new one works', async () => {
    const { key, id } = (await createKey(gateway.url, token, { name: 'rotated', agent_id: 7 })).body;
    expect((await useKey(key)).status).toBe(200);
    const rotated = await runCli(['keys', 'rotate', String(id), '--grace', '0'], withRedis());
    expect(rotated.code, rotated.stderr).toBe(OK);
    expect(rotated.stderr).toContain(CONFIRMED);
    expect((await useKey(key)).body).toMatchObject({ code: 'revoked_credential' });
    expect((await useKey(rotated.stdout.trim())).status).toBe(200);
  });

  it('rotate by default: both keys work during the grace period', async () => {
    const { key, id } = (await createKey(gateway.url, token, { name: 'graceful', agent_id: 7 })).body;
    expect((await useKey(key)).status).toBe(200);
    const rotated = await runCli(['keys', 'rotate', String(id)], withRedis());
    expect(rotated.code, rotated.stderr).toBe(OK);
    expect((await useKey(key)).status).toBe(200);
    expect((await useKey(rotated.stdout.trim())).status).toBe(200);
  });

  it('with Redis unreachable: the rotation is stored, the new key printed all the same, exit 1 store_unavailable', async () => {
    const { id } = (await createKey(gateway.url, token, { name: 'redis away', agent_id: 7 })).body;
    const unreachable = { DATABASE_URL: database.url, REDIS_URL: 'redis://127.0.0.1:1' };
    const rotated = await runCli(['keys', 'rotate', String(id), '--grace', '0', '--json'], unreachable);
    expect(rotated.code).toBe(REFUSED);
    const body = rotated.json<any>();
    expect(body).toMatchObject({ rotated_from: id, key: expect.stringMatching(RAW_KEY), error: { code: 'store_unavailable' } });
    expect(rotated.stderr).not.toContain(body.key);
    expect((await useKey(body.key)).status).toBe(200);
    expect((await request(`${gateway.url}/api/v1/api-keys/${id}`, { token })).body).toMatchObject({ status: 'revoked', rotated_to: body.id });

    // An update Redis cannot confirm fails; running it again announces the (unchanged) state again.
    const update = await runCli(['keys', 'update', String(body.id), '--name', 'renamed'], unreachable);
    expect(update.code).toBe(REFUSED);
    expect(update.stderr).toContain('Redis cannot be reached');
    const again = await runCli(['keys', 'update', String(body.id), '--name', 'renamed'], withRedis());
    expect(again.code, again.stderr).toBe(OK);
    expect(again.stdout).toMatch(/^unchanged API key /);
    expect(again.stderr).toContain(CONFIRMED);
  });
});
