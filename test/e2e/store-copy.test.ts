/* eslint-disable @typescript-eslint/no-explicit-any -- CLI and HTTP answers are read as loosely typed JSON */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli-process.ts';
import { ADMIN_PASSWORD, startGateway, emptyDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { createTestDatabase, describeWithPostgres, postgresUrl, type TestDatabase } from '../support/services.ts';
import { openStore } from '../../src/store/open.ts';
import { EMBEDDED_STORE_FILE } from '../../src/store/embedded.ts';

const OK = 0;
const REFUSED = 1;
const EVENTS = '/api/v1/agents/7/events';
/** The test server trusts local connections, so a password in the URL is accepted and ignored: it must never be printed. */
const PASSWORD = 'copy-test-s3cret';

/** What a running deployment holds, read through its own API before the copy. */
interface Deployment {
  adminToken: string;
  activeKey: { key: string; id: number };
  revokedKey: { key: string; id: number };
  keys: any[];
  auditEvents: any[];
}

/** Keys (one revoked, one used), a failed and a successful login: a bit of everything a store holds. */
async function populate(gateway: GatewayProcess): Promise<Deployment> {
  const adminToken = await loginAdmin(gateway.url);
  expect((await request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: 'nobody@example.test', password: 'wrong-password' } })).status).toBe(401);
  const created = async (body: Record<string, unknown>) => {
    const response = await createKey(gateway.url, adminToken, body);
    expect(response.status, response.text).toBe(201);
    return { key: response.body.key as string, id: response.body.id as number };
  };
  const activeKey = await created({ name: 'billing sync', agent_id: 7, scopes: ['events:write'] });
  await created({ name: 'tools', scopes: ['mcp:agents', 'mcp:tools'], expires_at: new Date(Date.now() + 86_400_000).toISOString() });
  const revokedKey = await created({ name: 'leaked', scopes: ['events:write'] });
  expect((await request(`${gateway.url}/api/v1/api-keys/${revokedKey.id}`, { method: 'DELETE', token: adminToken })).status).toBe(204);
  expect((await request(`${gateway.url}${EVENTS}`, { method: 'POST', token: activeKey.key, json: { type: 'ping' } })).status).toBe(200);
  const keys = (await request(`${gateway.url}/api/v1/api-keys`, { token: adminToken })).body;
  const auditEvents = (await request(`${gateway.url}/api/v1/audit-events?limit=500`, { token: adminToken })).body;
  expect(auditEvents.length).toBeGreaterThanOrEqual(5);
  return { adminToken, activeKey, revokedKey, keys, auditEvents };
}

/** `last_used_at` is written behind, up to the gateway's stop: everything else must be as it was. */
const withoutUse = (records: any[]) => records.map(({ last_used_at: _, ...record }) => record);

/** A gateway on the target answers for everything the source's did. */
async function expectSameDeployment(gateway: GatewayProcess, origin: Origin, before: Deployment): Promise<void> {
  origin.clear();
  const allowed = await request(`${gateway.url}${EVENTS}`, { method: 'POST', token: before.activeKey.key, json: { type: 'after the copy' } });
  expect(allowed.status, allowed.text).toBe(200);
  expect(origin.received.map((received) => received.headers['x-auth-key-id'])).toEqual([String(before.activeKey.id)]);

  const revoked = await request(`${gateway.url}${EVENTS}`, { method: 'POST', token: before.revokedKey.key, json: {} });
  expect(revoked.status).toBe(401);
  expect(revoked.body.code).toBe('revoked_credential');
  expect(origin.received).toHaveLength(1);

  const keys = await request(`${gateway.url}/api/v1/api-keys`, { token: before.adminToken });
  expect(keys.status, keys.text).toBe(200);
  expect(withoutUse(keys.body)).toEqual(withoutUse(before.keys));
  const audit = await request(`${gateway.url}/api/v1/audit-events?limit=500`, { token: before.adminToken });
  expect(audit.status).toBe(200);
  expect(audit.body).toEqual(before.auditEvents);

  // The password hash came along, and the id sequences moved past the copied ids.
  const token = await loginAdmin(gateway.url);
  const next = await createKey(gateway.url, token, { name: 'made on the target' });
  expect(next.status, next.text).toBe(201);
  expect(next.body.id).toBeGreaterThan(Math.max(...before.keys.map((key: any) => key.id)));
}

/** Every table of a PostgreSQL database, rows in order: equal snapshots mean nothing was written. */
async function snapshot(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const tables = await client.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1");
    const dump: Record<string, unknown[]> = {};
    for (const { tablename } of tables.rows) dump[tablename] = (await client.query(`SELECT * FROM "${tablename}" ORDER BY 1`)).rows;
    return JSON.stringify(dump);
  } finally {
    await client.end();
  }
}

function withPassword(url: string): string {
  const parsed = new URL(url);
  parsed.password = PASSWORD;
  return parsed.toString();
}

async function adminList(env: Record<string, string>): Promise<any[]> {
  const listed = await runCli(['admin', 'list', '--json'], env);
  expect(listed.code, listed.stderr).toBe(OK);
  return listed.json<any[]>();
}

function expectCopied(result: Awaited<ReturnType<typeof runCli>>, before: Deployment): void {
  expect(result.code, result.stderr).toBe(OK);
  const { copied } = result.json<any>();
  expect(copied).toMatchObject({ admins: 1, api_keys: before.keys.length, audit_events: before.auditEvents.length });
  expect(copied.settings).toBeGreaterThanOrEqual(1);
  expect(result.stdout + result.stderr).not.toContain(PASSWORD);
}

// Every step spawns a gateway or the CLI, and the embedded store takes a second or more to open.
describe('gatehouse store copy', { timeout: 240_000 }, () => {
  describeWithPostgres('between the embedded store and PostgreSQL', () => {
    let origin: Origin;
    const databases: TestDatabase[] = [];
    const gateways: GatewayProcess[] = [];
    const database = async () => {
      const created = await createTestDatabase();
      databases.push(created);
      return created;
    };
    const gateway = async (env: Record<string, string>) => {
      const started = await startGateway({ UPSTREAM_URL: origin.url, ...env });
      gateways.push(started);
      return started;
    };

    beforeAll(async () => {
      origin = await startOrigin();
    });
    afterEach(async () => {
      await Promise.all(gateways.splice(0).map((started) => started.stop()));
    });
    afterAll(async () => {
      await origin?.close();
      await Promise.all(databases.map((created) => created.drop()));
    });

    it('copies a running deployment from the embedded store to PostgreSQL: the same keys and admin token work there', async () => {
      const dataDir = emptyDataDir();
      const source = await gateway({ DATA_DIR: dataDir });
      const before = await populate(source);
      const target = withPassword((await database()).url);

      // Copied while its gateway runs: the embedded source is read beside it, one snapshot.
      const copied = await runCli(['store', 'copy', '--to', target, '--json'], { DATA_DIR: dataDir });
      expectCopied(copied, before);
      expect(copied.json<any>().to).toContain(':***@');
      await source.stop();
      const admins = await adminList({ DATA_DIR: dataDir });

      const moved = await gateway({ DATABASE_URL: target });
      await expectSameDeployment(moved, origin, before);
      expect(await adminList({ DATABASE_URL: target })).toEqual(admins);
    });

    it('copies a deployment from PostgreSQL to an embedded store, only reading the source', async () => {
      const sourceUrl = withPassword((await database()).url);
      const source = await gateway({ DATABASE_URL: sourceUrl });
      const before = await populate(source);
      await source.stop();
      const untouched = await snapshot(sourceUrl);
      const admins = await adminList({ DATABASE_URL: sourceUrl });
      // A directory that does not exist yet, given as a file: URL: the copy creates it.
      const targetDir = join(mkdtempSync(join(tmpdir(), 'gatehouse-copy-')), 'backup');

      const copied = await runCli(['store', 'copy', '--to', pathToFileURL(targetDir).href], { DATABASE_URL: sourceUrl });
      expect(copied.code, copied.stderr).toBe(OK);
      expect(copied.stdout).toMatch(/^copied 1 admin\(s\), 3 API key\(s\), \d+ audit event\(s\) and \d+ setting\(s\) from PostgreSQL at postgres:\/\/postgres:\*\*\*@/);
      expect(copied.stdout).toContain(`to the embedded store in ${targetDir}`);
      expect(copied.stdout + copied.stderr).not.toContain(PASSWORD);
      expect(await snapshot(sourceUrl)).toBe(untouched);

      const moved = await gateway({ DATA_DIR: targetDir });
      await expectSameDeployment(moved, origin, before);
      await moved.stop();
      expect(await adminList({ DATA_DIR: targetDir })).toEqual(admins);
    });

    it('refuses a target that holds data, and leaves it as it was', async () => {
      const source = { DATA_DIR: emptyDataDir() };
      expect((await runCli(['keys', 'create', '--name', 'in the source'], source)).code).toBe(OK);

      const targetUrl = withPassword((await database()).url);
      const added = await runCli(['admin', 'add', '--email', 'other@example.test'], { DATABASE_URL: targetUrl }, `${ADMIN_PASSWORD}\n`);
      expect(added.code, added.stderr).toBe(OK);
      const before = await snapshot(targetUrl);

      const refused = await runCli(['store', 'copy', '--to', targetUrl], source);
      expect(refused.code).toBe(REFUSED);
      expect(refused.stderr).toMatch(/^gatehouse: the target store is not empty \(it holds .+\).*\n$/);
      expect(refused.stdout).toBe('');
      expect(refused.stderr).not.toContain(PASSWORD);
      expect(await snapshot(targetUrl)).toBe(before);

      // The other way: an embedded target with a key in it.
      const targetDir = { DATA_DIR: emptyDataDir() };
      expect((await runCli(['keys', 'create', '--name', 'in the target'], targetDir)).code).toBe(OK);
      const keysBefore = await runCli(['keys', 'list', '--json'], targetDir);
      const refusedEmbedded = await runCli(['store', 'copy', '--to', targetDir.DATA_DIR], { DATABASE_URL: targetUrl });
      expect(refusedEmbedded.code).toBe(REFUSED);
      expect(refusedEmbedded.stderr).toMatch(/^gatehouse: the target store is not empty/);
      expect((await runCli(['keys', 'list', '--json'], targetDir)).stdout).toBe(keysBefore.stdout);
    });

    it('copies a name holding a NUL, which an embedded store written by 8.0 took, with U+FFFD in its place and one line naming it', async () => {
      const source = { DATA_DIR: emptyDataDir() };
      const created = await runCli(['keys', 'create', '--name', 'clean', '--json'], source);
      expect(created.code, created.stderr).toBe(OK);
      const bad = await runCli(['keys', 'create', '--name', 'to be spoilt', '--json'], source);
      const { id, key } = bad.json<any>();
      // As 8.0 stored it: SQLite keeps the NUL that PostgreSQL refuses.
      const sqlite = new DatabaseSync(join(source.DATA_DIR, EMBEDDED_STORE_FILE));
      sqlite.prepare('UPDATE api_keys SET name = ? WHERE id = ?').run('billing\u0000sync', id);
      sqlite.close();

      const target = (await database()).url;
      const copied = await runCli(['store', 'copy', '--to', target, '--json'], source);
      expect(copied.code, copied.stderr).toBe(OK);
      expect(copied.stderr).toBe(`gatehouse: name of API key ${id} held a character no store can keep (NUL or a lone surrogate): copied with U+FFFD in its place\n`);
      expect(copied.json<any>()).toMatchObject({ copied: { api_keys: 2 }, replaced: [{ table: 'api_keys', id, field: 'name' }] });

      // The target holds every key, the spoilt name with U+FFFD for the NUL, and the key still works.
      const client = new pg.Client({ connectionString: target });
      await client.connect();
      try {
        const rows = (await client.query<{ id: number; name: string }>('SELECT id::int AS id, name FROM api_keys ORDER BY id')).rows;
        expect(rows).toEqual([
          { id: created.json<any>().id, name: 'clean' },
          { id, name: 'billing\uFFFDsync' },
        ]);
      } finally {
        await client.end();
      }
      const moved = await gateway({ DATABASE_URL: target });
      const used = await request(`${moved.url}${EVENTS}`, { method: 'POST', token: key, json: { type: 'after the copy' } });
      expect(used.status, used.text).toBe(200);
    });

    it('creates a PostgreSQL target database that does not exist yet, its name quoted exactly', async () => {
      // Upper case and a hyphen: only a quoted identifier keeps this name as written.
      const name = `Gh-Copy-${randomBytes(4).toString('hex')}`;
      const server = new URL(postgresUrl()!);
      const targetUrl = new URL(server);
      targetUrl.pathname = `/${name}`;
      targetUrl.password = PASSWORD;
      try {
        const source = { DATA_DIR: emptyDataDir() };
        const key = await runCli(['keys', 'create', '--name', 'moved to a new database', '--json'], source);
        expect(key.code, key.stderr).toBe(OK);

        const copied = await runCli(['store', 'copy', '--to', targetUrl.toString()], source);
        expect(copied.code, copied.stderr).toBe(OK);
        expect(copied.stdout).toMatch(new RegExp(`^created the PostgreSQL database "${name}"\ncopied 0 admin\\(s\\), 1 API key\\(s\\)`));
        expect(copied.stdout + copied.stderr).not.toContain(PASSWORD);
        expect(await databasesNamed(server, name)).toEqual([name]);
        const listed = await runCli(['keys', 'list', '--json'], { DATABASE_URL: targetUrl.toString() });
        expect(listed.json<any[]>().map((record) => record.id)).toEqual([key.json<any>().id]);

        // Now it exists and holds data: refused as any non-empty target, nothing created.
        const again = await runCli(['store', 'copy', '--to', targetUrl.toString()], source);
        expect(again.code).toBe(REFUSED);
        expect(again.stderr).toMatch(/^gatehouse: the target store is not empty/);
        expect(again.stdout).toBe('');
      } finally {
        await onServer(server, `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      }
    });

    it('fails with one line and no password when the target cannot be reached', async () => {
      const unreachable = `postgres://postgres:${PASSWORD}@127.0.0.1:1/nowhere`;
      const dataDir = emptyDataDir();
      await (await openStore({ dataDir })).close();
      const failed = await runCli(['store', 'copy', '--to', unreachable], { DATA_DIR: dataDir });
      expect(failed.code).toBe(REFUSED);
      expect(failed.stderr).toMatch(/^gatehouse: --to: [^\n]+\n$/);
      expect(failed.stderr).toContain('postgres://postgres:***@127.0.0.1:1/nowhere');
      expect(failed.stderr).not.toContain(PASSWORD);
    });
  });

  it('refuses a source DATA_DIR that holds no store (a mistyped path), and creates nothing there', async () => {
    const dataDir = join(emptyDataDir(), 'mistyped');
    const failed = await runCli(['store', 'copy', '--to', join(emptyDataDir(), 'backup')], { DATA_DIR: dataDir });
    expect(failed.code).toBe(REFUSED);
    expect(failed.stderr).toMatch(/^gatehouse: DATA_DIR: cannot open the store: .*does not exist: there is no embedded store in /);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('refuses the configured store itself and an unknown scheme, before touching anything', async () => {
    const dataDir = emptyDataDir();
    const itself = await runCli(['store', 'copy', '--to', pathToFileURL(dataDir).href], { DATA_DIR: dataDir });
    expect(itself.code).toBe(REFUSED);
    expect(itself.stderr).toContain('--to is the configured store itself');
    const unknown = await runCli(['store', 'copy', '--to', `mysql://root:${PASSWORD}@db/gatehouse`], { DATA_DIR: dataDir });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unsupported scheme 'mysql:'");
    expect(unknown.stderr).not.toContain(PASSWORD);
  });
});

async function onServer(server: URL, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: server.toString() });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** The databases of that exact name on the server (no case folding). */
async function databasesNamed(server: URL, name: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: server.toString() });
  await client.connect();
  try {
    return (await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = $1', [name])).rows.map((row) => row.datname);
  } finally {
    await client.end();
  }
}
