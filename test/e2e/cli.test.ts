/* eslint-disable @typescript-eslint/no-explicit-any -- CLI and HTTP answers are read as loosely typed JSON */
import { verify } from '@node-rs/argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/main.ts';
import { runCli } from '../support/cli-process.ts';
import { startGateway, tempDataDir } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { createTestDatabase, describeWithPostgres, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';

const OK = 0;
const REFUSED = 1;
const USAGE = 2;

describe('gatehouse CLI: usage', () => {
  it.each(COMMANDS.map((command) => command.name))('`%s --help` shows its usage and exits 0', async (name) => {
    const result = await runCli([...name.split(' '), '--help']);
    expect(result.code).toBe(OK);
    expect(result.stdout).toContain(`Usage: gatehouse ${name}`);
    expect(result.stdout).toContain('--help');
  });

  it('lists every command in the main help; `help <command>` is the command help', async () => {
    const main = await runCli(['--help']);
    expect(main.code).toBe(OK);
    for (const command of COMMANDS) expect(main.stdout).toContain(command.name);
    const viaHelp = await runCli(['help', 'keys', 'create']);
    expect(viaHelp.code).toBe(OK);
    expect(viaHelp.stdout).toBe((await runCli(['keys', 'create', '--help'])).stdout);
    const group = await runCli(['keys', '--help']);
    expect(group.code).toBe(OK);
    expect(group.stdout).toMatch(/keys create[\s\S]*keys list[\s\S]*keys revoke/);
  });

  it.each([
    { args: [], why: 'no command' },
    { args: ['frobnicate'], why: 'an unknown command' },
    { args: ['keys'], why: 'a group without a command' },
    { args: ['keys', 'frobnicate'], why: 'an unknown command in a group' },
    { args: ['keys', 'create'], why: 'a missing required option' },
    { args: ['keys', 'create', '--name'], why: 'an option without its value' },
    { args: ['keys', 'create', '--name', 'x', '--bogus'], why: 'an unknown option' },
    { args: ['keys', 'list', 'extra'], why: 'an unexpected argument' },
    { args: ['keys', 'revoke'], why: 'a missing id' },
    { args: ['keys', 'revoke', '01'], why: 'a non-canonical id' },
    { args: ['admin', 'add'], why: 'admin add without --email' },
  ])('exits 2 on $why, with a pointer to --help', async ({ args }) => {
    const result = await runCli(args, { DATA_DIR: tempDataDir() });
    expect(result.code).toBe(USAGE);
    expect(result.stderr).toMatch(/^gatehouse: .+\n/);
    expect(result.stderr).toContain('--help');
  });
});

// Each command is a Node process of its own (its start-up, more on a loaded machine): the tests
// that run several take their time.
describe('gatehouse CLI on the embedded store', { timeout: 120_000 }, () => {
  const env = { DATA_DIR: tempDataDir() };
  const refusals = { DATA_DIR: tempDataDir() };
  const adminEmail = 'cli-admin@example.test';

  it('creates, lists and revokes keys, in the HTTP API\'s record format', async () => {
    const created = await runCli(
      ['keys', 'create', '--name', ' nightly export ', '--agent-id', '7', '--scope', 'events:write', '--scope', 'mcp:agents', '--scope', 'events:write', '--json'],
      env,
    );
    expect(created.code, created.stderr).toBe(OK);
    const record = created.json<any>();
    expect(record).toMatchObject({ name: 'nightly export', agent_id: 7, scopes: ['events:write', 'mcp:agents'], status: 'active', is_active: true });
    expect(record.key).toMatch(/^ghk_[A-Za-z0-9]{46}$/);
    expect(record.key_prefix).toBe(record.key.slice(0, 12));

    // Without --json: the raw key alone on stdout, for KEY=$(gatehouse keys create …).
    const plain = await runCli(['keys', 'create', '--name', 'plain'], env);
    expect(plain.code).toBe(OK);
    expect(plain.stdout).toMatch(/^ghk_[A-Za-z0-9]{46}\n$/);
    expect(plain.stderr).toContain('shown only this once');

    const listed = await runCli(['keys', 'list', '--json'], env);
    expect(listed.code).toBe(OK);
    const records = listed.json<any[]>();
    expect(records.map((r) => r.name)).toEqual(['nightly export', 'plain']);
    expect(records[0]).toEqual({ ...record, key: undefined });
    expect(listed.stdout).not.toContain(record.key);

    const revoked = await runCli(['keys', 'revoke', String(record.id), '--json'], env);
    expect(revoked.code).toBe(OK);
    expect(revoked.json<any>()).toMatchObject({ id: record.id, status: 'revoked', is_active: false });
    // Idempotent, as DELETE is.
    expect((await runCli(['keys', 'revoke', String(record.id)], env)).code).toBe(OK);

    const table = await runCli(['keys', 'list'], env);
    expect(table.stdout).toMatch(new RegExp(`^${record.id}\\s+${record.key_prefix}\\s+revoked\\s+7\\s+events:write,mcp:agents`, 'm'));
  });

  it.each([
    { args: ['--name', 'x', '--scope', 'mcp:*'], field: 'scopes.0', message: /wildcard/ },
    { args: ['--name', 'x', '--scope', 'teleport'], field: 'scopes.0', message: /unknown scope/ },
    { args: ['--name', '   '], field: 'name', message: /empty/ },
    { args: ['--name', 'x', '--agent-id', '0'], field: 'agent_id', message: /positive/ },
    { args: ['--name', 'x', '--agent-id', 'seven'], field: 'agent_id', message: /number/ },
    { args: ['--name', 'x', '--expires-at', '2020-01-01T00:00:00Z'], field: 'expires_at', message: /future/ },
    { args: ['--name', 'x', '--expires-at', '2030-01-01'], field: 'expires_at', message: /ISO 8601/ },
  ])('refuses $field as POST /api/v1/api-keys does: exit 1', async ({ args, field, message }) => {
    const result = await runCli(['keys', 'create', ...args, '--json'], refusals);
    expect(result.code).toBe(REFUSED);
    const { error } = result.json<any>();
    expect(error.code).toBe('validation_failed');
    expect(error.errors).toContainEqual({ field, message: expect.stringMatching(message) });
    expect(result.stderr).toMatch(/^gatehouse: /);
  });

  it('created nothing for any of those refusals', async () => {
    expect((await runCli(['keys', 'list', '--json'], refusals)).json()).toEqual([]);
  });

  it('holds the licence cap (LICENSE_API_KEYS): exit 1 license_limit, nothing created; revoking frees a slot', async () => {
    const capped = { DATA_DIR: tempDataDir(), LICENSE_API_KEYS: '1' };
    const first = await runCli(['keys', 'create', '--name', 'one', '--json'], capped);
    expect(first.code).toBe(OK);
    const over = await runCli(['keys', 'create', '--name', 'two', '--json'], capped);
    expect(over.code).toBe(REFUSED);
    expect(over.json<any>().error.code).toBe('license_limit');
    expect((await runCli(['keys', 'list', '--json'], capped)).json<any[]>()).toHaveLength(1);
    expect((await runCli(['keys', 'revoke', String(first.json<any>().id)], capped)).code).toBe(OK);
    expect((await runCli(['keys', 'create', '--name', 'two'], capped)).code).toBe(OK);
  });

  it('refuses to revoke an unknown key (exit 1, not_found)', async () => {
    const result = await runCli(['keys', 'revoke', '999', '--json'], env);
    expect(result.code).toBe(REFUSED);
    expect(result.json<any>().error.code).toBe('not_found');
  });

  it('adds admins and resets passwords read from stdin, never from the command line', async () => {
    const added = await runCli(['admin', 'add', '--email', adminEmail, '--json'], env, 'first password 1\n');
    expect(added.code, added.stderr).toBe(OK);
    expect(added.json<any>()).toMatchObject({ email: adminEmail });
    expect(added.stdout).not.toContain('first password');

    const again = await runCli(['admin', 'add', '--email', adminEmail.toUpperCase(), '--json'], env, 'another password\n');
    expect(again.code).toBe(REFUSED);
    expect(again.json<any>().error.code).toBe('admin_exists');

    // The API's rule for a new password (POST /api/v1/auth/password), not a looser one of the CLI's own.
    const short = await runCli(['admin', 'add', '--email', 'short@example.test', '--json'], env, '8 chars!\n');
    expect(short.code).toBe(REFUSED);
    expect(short.stderr).toBe('gatehouse: password: must be at least 12 characters\n');
    expect(short.json<any>().error).toEqual({ code: 'validation_failed', message: 'password: must be at least 12 characters' });
    const shortReset = await runCli(['admin', 'reset-password', '--email', adminEmail], env, 'eleven char\n');
    expect(shortReset.stderr).toBe('gatehouse: password: must be at least 12 characters\n');
    expect((await runCli(['admin', 'add', '--email', 'not-an-email'], env, 'long enough\n')).code).toBe(REFUSED);
    const noPassword = await runCli(['admin', 'add', '--email', 'empty@example.test'], env, '');
    expect(noPassword.code).toBe(REFUSED);
    expect(noPassword.stderr).toContain('no password');

    const reset = await runCli(['admin', 'reset-password', '--email', adminEmail], env, 'second password 2\n');
    expect(reset.code, reset.stderr).toBe(OK);
    expect((await runCli(['admin', 'reset-password', '--email', 'nobody@example.test'], env, 'whatever123\n')).code).toBe(REFUSED);

    const list = await runCli(['admin', 'list', '--json'], env);
    expect(list.json<any[]>().map((admin) => admin.email)).toEqual([adminEmail]);
    expect(list.stdout).not.toContain('argon2');
  });

  it('agrees with a gateway on the same store, which holds it alone while it runs', async () => {
    const before = (await runCli(['keys', 'list', '--json'], env)).json<any[]>();
    const gateway = await startGateway(env);
    try {
      // The password the CLI set is the one the gateway checks.
      const token = await loginAdmin(gateway.url, adminEmail, 'second password 2');
      const overHttp = await request(`${gateway.url}/api/v1/api-keys`, { token });
      expect(overHttp.body).toEqual(before);

      // The embedded store is one process at a time: the CLI is refused while the gateway holds it.
      const busy = await runCli(['keys', 'list'], env);
      expect(busy.code).toBe(REFUSED);
      expect(busy.stderr).toMatch(/DATA_DIR: cannot open the store: .* is in use by another process \(a running gateway, or a gatehouse command\)/);

      const audit = await request(`${gateway.url}/api/v1/audit-events?limit=100`, { token });
      expect(audit.status).toBe(200);
      const cli = [...audit.body].reverse().filter((event: any) => event.actor_kind === 'cli');
      expect(cli.map((event: any) => event.action)).toEqual([
        'key_created',
        'key_created',
        'key_revoked',
        'key_revoked',
        'admin_created',
        'admin_password_reset',
      ]);
      expect(cli[0]).toMatchObject({ subject_id: String(before[0].id), client_address: null, actor_id: expect.any(String) });
      expect(audit.body[0]).toMatchObject({ action: 'login_succeeded', actor_kind: 'admin' });

      const viaApi = await createKey(gateway.url, token, { name: 'made over HTTP' });
      expect(viaApi.status).toBe(201);
      expect(await gateway.stop()).toBe(0);
      const after = (await runCli(['keys', 'list', '--json'], env)).json<any[]>();
      expect(after.at(-1)).toEqual({ ...viaApi.body, key: undefined });
    } finally {
      await gateway.kill();
    }
  });
});

describe('gatehouse config check', () => {
  it('prints the effective configuration with secrets masked', async () => {
    const env = {
      DATA_DIR: tempDataDir(),
      DATABASE_URL: 'postgres://gatehouse:db-secret-1@db.internal:5432/gatehouse?sslpassword=ssl-secret-2',
      REDIS_URL: 'redis://:redis-secret-3@cache:6379',
      JWT_SECRET: 'jwt-secret-4-0123456789abcdefghijklmnopqrstuvwxyz',
      ADMIN_PASSWORD: 'admin-secret-5',
      LICENSE_API_KEYS: '25',
      LICENSE_FEATURES: 'events,recall',
      DEFAULT_KEY_RATE_LIMIT: '600/1m',
    };
    const json = await runCli(['config', 'check', '--json'], env);
    expect(json.code, json.stderr).toBe(OK);
    const plain = await runCli(['config', 'check'], env);
    expect(plain.code).toBe(OK);
    for (const output of [json.stdout, plain.stdout]) {
      for (const secret of ['db-secret-1', 'ssl-secret-2', 'redis-secret-3', 'jwt-secret-4', 'admin-secret-5']) expect(output).not.toContain(secret);
    }
    const effective = json.json<any>();
    const variable = (name: string) => effective.environment.find((entry: any) => entry.name === name);
    expect(variable('DATABASE_URL')).toEqual({
      name: 'DATABASE_URL',
      value: 'postgres://gatehouse:***@db.internal:5432/gatehouse?sslpassword=***',
      source: 'env',
    });
    expect(variable('JWT_SECRET').value).toBe('***');
    expect(variable('PORT')).toEqual({ name: 'PORT', value: '8080', source: 'default' });
    expect(variable('REDIS_URL').value).toBe('redis://:***@cache:6379');
    expect(effective.licence).toEqual({ api_keys: 25, features: ['events', 'recall'] });
    expect(effective.routes.map((route: any) => route.name)).toEqual(['events', 'mcp', 'admin']);
    expect(effective.mcp_tools).toHaveLength(9);
    expect(effective.mcp_tools[0]).toEqual({ name: 'place_outbound_call', scope: 'mcp:calls', feature: null, rate_limit: null });
    expect(variable('DEFAULT_KEY_RATE_LIMIT')).toEqual({ name: 'DEFAULT_KEY_RATE_LIMIT', value: '600 per 60 s', source: 'env' });
    expect(plain.stdout).toMatch(/^DEFAULT_KEY_RATE_LIMIT\s+600 per 60 s\s+env$/m);
    expect(plain.stdout).toContain('configuration is valid');
  });

  it.each<{ env: Record<string, string>; line: RegExp }>([
    { env: { LICENSE_FEATURES: 'teleport' }, line: /^gatehouse: LICENSE_FEATURES: unknown feature "teleport"/ },
    { env: { PORT: 'eighty' }, line: /^gatehouse: PORT: / },
    { env: { CONFIG_DIR: '/nonexistent' }, line: /^gatehouse: CONFIG_DIR: / },
  ])('refuses a bad setting with one line naming it: $line', async ({ env, line }) => {
    const result = await runCli(['config', 'check', '--json'], env);
    expect(result.code).toBe(REFUSED);
    expect(result.stderr).toMatch(line);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.json<any>().error.code).toBe('invalid_configuration');
  });
});

describe('gatehouse hash-password', () => {
  it('prints an argon2id hash of the password on stdin, with the ARGON2_* parameters', async () => {
    const result = await runCli(['hash-password'], { ARGON2_MEMORY_KIB: '2048', ARGON2_TIME_COST: '3' }, 'hunter2 hunter2\nignored second line\n');
    expect(result.code, result.stderr).toBe(OK);
    const hash = result.stdout.trim();
    expect(hash).toMatch(/^\$argon2id\$v=19\$m=2048,t=3,p=1\$/);
    expect(await verify(hash, 'hunter2 hunter2')).toBe(true);
    expect(result.stdout + result.stderr).not.toContain('hunter2');
    const json = await runCli(['hash-password', '--json'], {}, 'hunter2 hunter2\n');
    expect(await verify(json.json<any>().hash, 'hunter2 hunter2')).toBe(true);
  });

  it('refuses an empty password (exit 1)', async () => {
    const result = await runCli(['hash-password'], {}, '');
    expect(result.code).toBe(REFUSED);
  });
});

describeWithPostgres('gatehouse CLI and a running gateway on one PostgreSQL database', () => {
  let database: TestDatabase;
  let origin: Origin;
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  let token: string;
  const cliEnv = () => ({ DATABASE_URL: database.url });

  beforeAll(async () => {
    database = await createTestDatabase();
    origin = await startOrigin();
    gateway = await startGateway({ DATABASE_URL: database.url, UPSTREAM_URL: origin.url });
    token = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
    await database?.drop();
  });

  it('a key created by the CLI is listed by the gateway and works through it', async () => {
    const created = await runCli(['keys', 'create', '--name', 'from the cli', '--agent-id', '7', '--json'], cliEnv());
    expect(created.code, created.stderr).toBe(OK);
    const record = created.json<any>();

    const listed = await request(`${gateway.url}/api/v1/api-keys`, { token });
    expect(listed.body).toContainEqual({ ...record, key: undefined });

    const event = await request(`${gateway.url}/api/v1/agents/7/events`, { method: 'POST', token: record.key, json: { type: 'ping' } });
    expect(event.status).toBe(200);
    expect(origin.receivedAt('/api/v1/agents/7/events').at(-1)?.headers['x-auth-key-id']).toBe(String(record.id));
  });

  it('a key created over HTTP is listed and revoked by the CLI; the gateway sees the revocation', async () => {
    const viaApi = (await createKey(gateway.url, token, { name: 'from the api', scopes: ['mcp:agents'] })).body;
    const listed = (await runCli(['keys', 'list', '--json'], cliEnv())).json<any[]>();
    expect(listed).toContainEqual({ ...viaApi, key: undefined });

    const revoked = await runCli(['keys', 'revoke', String(viaApi.id), '--json'], cliEnv());
    expect(revoked.code).toBe(OK);
    const overHttp = (await request(`${gateway.url}/api/v1/api-keys`, { token })).body.find((r: any) => r.id === viaApi.id);
    expect(overHttp).toMatchObject({ status: 'revoked', is_active: false });
  });

  it('counts the keys the gateway created towards the licence cap, and the other way round', async () => {
    const active = (await request(`${gateway.url}/api/v1/api-keys`, { token })).body.filter((r: any) => r.is_active).length;
    const over = await runCli(['keys', 'create', '--name', 'one too many', '--json'], { ...cliEnv(), LICENSE_API_KEYS: String(active) });
    expect(over.code).toBe(REFUSED);
    expect(over.json<any>().error.code).toBe('license_limit');
  });

  it('writes the same audit trail as the HTTP API, in order', async () => {
    const audit = await request(`${gateway.url}/api/v1/audit-events`, { token });
    expect(audit.status).toBe(200);
    const trail = [...audit.body].reverse().map((event: any) => `${event.action}:${event.actor_kind}`);
    expect(trail).toEqual(['login_succeeded:admin', 'key_created:cli', 'key_created:admin', 'key_revoked:cli']);
  });
});

describe.skipIf(postgresUrl() === null || redisUrl() === null)('gatehouse keys revoke with REDIS_URL: running gateways drop the key at once', () => {
  let database: TestDatabase;
  let origin: Origin;
  let gateway: Awaited<ReturnType<typeof startGateway>>;
  let token: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    origin = await startOrigin();
    // A long cache TTL: only the revocation bus can make the gateway forget a key it has cached.
    gateway = await startGateway({ DATABASE_URL: database.url, REDIS_URL: redisUrl()!, KEY_CACHE_TTL: '10m', UPSTREAM_URL: origin.url });
    token = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
    await database?.drop();
  });

  const useKey = (key: string) => request(`${gateway.url}/api/v1/agents/7/events`, { method: 'POST', token: key, json: { type: 'ping' } });

  it('without REDIS_URL the CLI cannot reach the gateway: the cached key keeps working (the control)', async () => {
    const { key, id } = (await createKey(gateway.url, token, { name: 'control', agent_id: 7 })).body;
    expect((await useKey(key)).status).toBe(200);
    const revoked = await runCli(['keys', 'revoke', String(id)], { DATABASE_URL: database.url });
    expect(revoked.code, revoked.stderr).toBe(OK);
    expect(revoked.stderr).not.toContain('confirmed');
    expect((await useKey(key)).status).toBe(200);
  });

  it('with REDIS_URL the revoke returns only after the gateway dropped the key: the next request is refused', async () => {
    const { key, id } = (await createKey(gateway.url, token, { name: 'revoked by the cli', agent_id: 7 })).body;
    expect((await useKey(key)).status).toBe(200);
    const forwarded = origin.receivedAt('/api/v1/agents/7/events').length;

    const revoked = await runCli(['keys', 'revoke', String(id), '--json'], { DATABASE_URL: database.url, REDIS_URL: redisUrl()! });
    expect(revoked.code, revoked.stderr).toBe(OK);
    expect(revoked.json<any>()).toMatchObject({ id, status: 'revoked' });
    // The one line about Redis: closing the command's own connections is no outage to report.
    expect(revoked.stderr).toBe('1 of 1 running gateway(s) confirmed they dropped the key\n');

    const refused = await useKey(key);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ code: 'revoked_credential' });
    expect(origin.receivedAt('/api/v1/agents/7/events')).toHaveLength(forwarded);
  });

  it('with Redis unreachable the revocation is stored and the command fails with store_unavailable', async () => {
    const { id } = (await createKey(gateway.url, token, { name: 'redis away' })).body;
    const revoked = await runCli(['keys', 'revoke', String(id), '--json'], { DATABASE_URL: database.url, REDIS_URL: 'redis://127.0.0.1:1' });
    expect(revoked.code).toBe(REFUSED);
    expect(revoked.json<any>().error.code).toBe('store_unavailable');
    const record = (await request(`${gateway.url}/api/v1/api-keys`, { token })).body.find((r: any) => r.id === id);
    expect(record).toMatchObject({ status: 'revoked' });
  });
});

