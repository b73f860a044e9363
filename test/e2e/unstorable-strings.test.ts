/* eslint-disable @typescript-eslint/no-explicit-any -- HTTP and CLI answers are read as loosely typed JSON */
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli as runCliInProcess } from '../../src/cli/main.ts';
import { runCli } from '../support/cli-process.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_ARGON2, REPO_ROOT, startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request, type JsonResponse } from '../support/http.ts';
import { createTestDatabase, describeWithPostgres, type TestDatabase } from '../support/services.ts';

const PROBLEM = 'application/problem+json';
const NUL = 'U+0000';
const LONE = 'lone surrogate';
const OK = 0;
const REFUSED = 1;

/** What the store holds, read through the API: keys and the audit trail. */
async function holdings(gateway: GatewayProcess, token: string) {
  const keys = await request(`${gateway.url}/api/v1/api-keys`, { token });
  const audit = await request(`${gateway.url}/api/v1/audit-events?limit=500`, { token });
  expect(keys.status).toBe(200);
  expect(audit.status).toBe(200);
  return { keys: keys.body, audit: audit.body };
}

function expectRefused(response: JsonResponse, field: string, problem: string): void {
  expect(response.status, response.text).toBe(400);
  expect(response.headers.get('content-type')).toContain(PROBLEM);
  expect(response.body).toMatchObject({ status: 400, code: 'validation_failed' });
  expect(response.body.errors).toEqual([{ field, message: expect.stringContaining(problem) }]);
}

/** The CLI run in this process: an argument holding a NUL cannot reach a spawned one (see the test below). */
async function cliInProcess(args: string[], env: Record<string, string>) {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    stdin: Readable.from([]),
    env: { CONFIG_DIR: `${REPO_ROOT}config`, ...FAST_ARGON2, ...env },
  };
  const code = await runCliInProcess(args, io);
  return { code, stdout, stderr };
}

/** Every endpoint taking a string, on one store: refused with the field named, nothing stored. */
function endpointCases(name: string, gatewayEnv: () => Promise<Record<string, string>>) {
  describe(`on ${name}`, { timeout: 120_000 }, () => {
    let gateway: GatewayProcess;
    let env: Record<string, string>;
    let token: string;
    let keyId: number;

    beforeAll(async () => {
      env = await gatewayEnv();
      gateway = await startGateway(env);
      token = await loginAdmin(gateway.url);
      keyId = (await createKey(gateway.url, token, { name: 'kept as it is' })).body.id;
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    it.each([
      ['a NUL in name', { name: 'billing\u0000sync' }, 'name', NUL],
      ['a lone surrogate in name', { name: 'billing \ud800' }, 'name', LONE],
      ['a lone low surrogate in name', { name: '\udc00 sync' }, 'name', LONE],
      ['a NUL in a scope', { name: 'x', scopes: ['events:write\u0000'] }, 'scopes.0', NUL],
      ['a lone surrogate in a scope', { name: 'x', scopes: ['events:write', '\ud83d'] }, 'scopes.1', LONE],
    ])('POST /api/v1/api-keys with %s: 400 naming the field, nothing stored', async (_what, body, field, problem) => {
      const before = await holdings(gateway, token);
      expectRefused(await createKey(gateway.url, token, body), field, problem);
      expect(await holdings(gateway, token)).toEqual(before);
    });

    it.each([
      ['a NUL in name', { name: '\u0000' }, 'name', NUL],
      ['a lone surrogate in name', { name: 'renamed \ud800' }, 'name', LONE],
      ['a NUL in a scope', { scopes: ['mcp:agents\u0000'] }, 'scopes.0', NUL],
    ])('PATCH /api/v1/api-keys/{id} with %s: 400 naming the field, the key unchanged', async (_what, body, field, problem) => {
      const before = await holdings(gateway, token);
      expectRefused(await request(`${gateway.url}/api/v1/api-keys/${keyId}`, { method: 'PATCH', token, json: body }), field, problem);
      expect(await holdings(gateway, token)).toEqual(before);
    });

    it.each([
      ['a NUL in email', { email: `${ADMIN_EMAIL}\u0000`, password: ADMIN_PASSWORD }, 'email', NUL],
      ['a lone surrogate in email', { email: `\ud800${ADMIN_EMAIL}`, password: ADMIN_PASSWORD }, 'email', LONE],
      ['a lone surrogate in password', { email: ADMIN_EMAIL, password: `${ADMIN_PASSWORD}\udfff` }, 'password', LONE],
    ])('POST /api/v1/auth/login with %s: 400 naming the field, nothing recorded', async (_what, body, field, problem) => {
      const before = await holdings(gateway, token);
      expectRefused(await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: body }), field, problem);
      expect(await holdings(gateway, token)).toEqual(before);
    });

    it('a NUL in a login password is only a wrong password (401): passwords are hashed, never stored', async () => {
      const response = await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password: `${ADMIN_PASSWORD}\u0000` } });
      expect(response.status, response.text).toBe(401);
      expect(response.body.code).toBe('invalid_credential');
    });

    it.each([
      ['new_password', { current_password: ADMIN_PASSWORD, new_password: 'twelve chars and \ud800' }],
      ['current_password', { current_password: `${ADMIN_PASSWORD}\ud800`, new_password: 'another long password' }],
    ])('POST /api/v1/auth/password with a lone surrogate in %s: 400 naming it, the password unchanged', async (field, body) => {
      const before = await holdings(gateway, token);
      expectRefused(await request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token, json: body }), field, LONE);
      expect(await holdings(gateway, token)).toEqual(before);
      await loginAdmin(gateway.url);
    });

    it('the CLI refuses a NUL in `keys create --name` and in `admin add --email` on this store, and stores nothing', async () => {
      // The CLI works on the gateway's store beside it (an embedded one through its own DATA_DIR: a copy of none).
      const cliEnv: Record<string, string> = env.DATABASE_URL ? { DATABASE_URL: env.DATABASE_URL } : { DATA_DIR: tempDataDir() };
      const key = await cliInProcess(['keys', 'create', '--name', 'nightly\u0000export', '--json'], cliEnv);
      expect(key.code).toBe(REFUSED);
      expect(key.stderr).toMatch(/^gatehouse: name: must not contain a NUL character \(U\+0000\)\n$/);
      expect(JSON.parse(key.stdout)).toEqual({ error: { code: 'validation_failed', message: expect.any(String), errors: [{ field: 'name', message: expect.stringContaining(NUL) }] } });
      const admin = await cliInProcess(['admin', 'add', '--email', 'second\u0000@example.test'], cliEnv);
      expect(admin.code).toBe(REFUSED);
      expect(admin.stderr).toBe('gatehouse: email: must not contain a NUL character (U+0000)\n');
      const keys = await cliInProcess(['keys', 'list', '--json'], cliEnv);
      expect(keys.code).toBe(OK);
      expect(JSON.parse(keys.stdout).map((record: any) => record.name)).not.toContain('nightly\u0000export');
      const admins = await cliInProcess(['admin', 'list', '--json'], cliEnv);
      expect(JSON.parse(admins.stdout).map((record: any) => record.email)).not.toContain('second\u0000@example.test');
    });
  });
}

describe('strings a store cannot hold (NUL, lone surrogates): 400 validation_failed, never a 500', () => {
  endpointCases('the embedded store', async () => ({}));

  describeWithPostgres('PostgreSQL', () => {
    let database: TestDatabase;
    endpointCases('PostgreSQL', async () => {
      database = await createTestDatabase();
      return { DATABASE_URL: database.url };
    });
    afterAll(async () => {
      await database?.drop();
    });
  });

  it('a spawned CLI cannot be given a NUL in an argument: the operating system passes C strings', () => {
    expect(() => spawn(process.execPath, ['bin/gatehouse.js', 'keys', 'create', '--name', 'a\u0000b'], { cwd: REPO_ROOT })).toThrow(/null bytes/);
  });

  it('`gatehouse admin add` takes a NUL in a piped password (hashed, never stored): that admin logs in with it', { timeout: 120_000 }, async () => {
    const dataDir = tempDataDir();
    const password = 'a password with a \u0000 in it';
    const added = await runCli(['admin', 'add', '--email', 'nul-password@example.test'], { DATA_DIR: dataDir }, `${password}\n`);
    expect(added.code, added.stderr).toBe(OK);
    const gateway = await startGateway({ DATA_DIR: dataDir });
    try {
      await loginAdmin(gateway.url, 'nul-password@example.test', password);
    } finally {
      await gateway.stop();
    }
  });
});
