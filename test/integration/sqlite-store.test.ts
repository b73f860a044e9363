import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { DATA_DIR_LOCK_FILE } from '../../src/store/data-dir-lock.ts';
import { EMBEDDED_STORE_FILE } from '../../src/store/embedded.ts';
import { openStore } from '../../src/store/open.ts';
import type { StoreData } from '../../src/store/store.ts';
import { StoreUnavailableError } from '../../src/store/unavailable.ts';
import { runGateway } from '../support/gateway-process.ts';
import { createTestDatabase, describeWithPostgres } from '../support/services.ts';
import { IMPORT_OPEN_STORE, killHard, runStoreScript } from '../support/store-process.ts';

const dataDir = () => mkdtempSync(join(tmpdir(), 'gatehouse-sqlite-'));

/** A DATA_DIR as an earlier build left it: PGlite's cluster in `pglite/`. */
function pgliteDataDir(): string {
  const dir = dataDir();
  mkdirSync(join(dir, 'pglite', 'base'), { recursive: true });
  writeFileSync(join(dir, 'pglite', 'PG_VERSION'), '17\n');
  return dir;
}

describe('the embedded store refuses a DATA_DIR of another format', () => {
  it('holding a PGlite store from 8.0: one line naming the command that converts it, and nothing written beside it', async () => {
    const dir = pgliteDataDir();
    const error: unknown = await openStore({ dataDir: dir }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    const { message } = error as Error;
    expect(message).not.toContain('\n');
    expect(message).toContain(`${dir} holds an embedded store from Gatehouse 8.0 (PGlite, in ${join(dir, 'pglite')})`);
    expect(message).toMatch(/: run 'gatehouse store upgrade' with the same DATA_DIR once, with the gateway stopped, to convert it/);
    expect(existsSync(join(dir, EMBEDDED_STORE_FILE))).toBe(false);
    expect(existsSync(join(dir, DATA_DIR_LOCK_FILE))).toBe(false);
  });

  it('holding a gatehouse.sqlite that is not SQLite: refused, and the file left as it was', async () => {
    const dir = dataDir();
    const file = join(dir, EMBEDDED_STORE_FILE);
    writeFileSync(file, 'PGDMP this is a pg_dump, not a database\n');
    await expect(openStore({ dataDir: dir })).rejects.toThrow(`${file} is not an SQLite database: move it away to start empty`);
    expect(readFileSync(file, 'utf8')).toBe('PGDMP this is a pg_dump, not a database\n');
  });

  it('migrated by a newer Gatehouse: refused, rather than read with a schema this build does not know', async () => {
    const dir = dataDir();
    await (await openStore({ dataDir: dir })).close();
    const db = new DatabaseSync(join(dir, EMBEDDED_STORE_FILE));
    db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, ?, 0)').run('from the future');
    db.close();
    await expect(openStore({ dataDir: dir })).rejects.toThrow(/schema is version 99, from a newer Gatehouse/);
  });

  it('holding a zero-length gatehouse.sqlite: refused, never opened as a new, empty store (test/integration/embedded-files.test.ts)', async () => {
    const dir = dataDir();
    writeFileSync(join(dir, EMBEDDED_STORE_FILE), '');
    await expect(openStore({ dataDir: dir })).rejects.toThrow(`${join(dir, EMBEDDED_STORE_FILE)} is empty (0 bytes)`);
    expect(readFileSync(join(dir, EMBEDDED_STORE_FILE), 'utf8')).toBe('');
  });

  it('stops the gateway at start with one line naming DATA_DIR', { timeout: 60_000 }, async () => {
    const { code, output } = await runGateway({ DATA_DIR: pgliteDataDir() }, 30_000);
    expect(code).not.toBe(0);
    const lines = output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^gatehouse: DATA_DIR: cannot open the store: .* holds an embedded store from Gatehouse 8\.0 .*'gatehouse store upgrade'/);
  });
});

describe('the embedded store while an outside tool holds its write lock', () => {
  it('fails the write as unavailable after its short busy timeout, and writes again once the lock is gone', { timeout: 30_000 }, async () => {
    const dir = dataDir();
    const store = await openStore({ dataDir: dir });
    const outside = new DatabaseSync(join(dir, EMBEDDED_STORE_FILE));
    try {
      outside.exec('BEGIN IMMEDIATE');
      // Refused as unavailable once its busy timeout has passed, rather than waiting for the lock without end.
      const refused: unknown = await store.getOrCreateSetting('jwt_secret', 'x').catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(StoreUnavailableError);
      // Reads go on: WAL readers do not wait for the writer.
      expect(await store.countAdmins()).toBe(0);
      outside.exec('ROLLBACK');
      expect(await store.getOrCreateSetting('jwt_secret', 'x')).toBe('x');
    } finally {
      outside.close();
      await store.close();
    }
  });
});

/** Opens the store in DATA_DIR, creates a key and revokes it (each with its audit event), says so, and waits to be killed. */
const CREATE_AND_REVOKE = `
${IMPORT_OPEN_STORE}
const store = await openStore({ dataDir: process.env.DATA_DIR });
const audit = (action) => (row) => ({ action, actorKind: 'admin', actorId: '1', subjectId: String(row.id), clientAddress: null, detail: {} });
const key = { name: 'killed', agentId: null, keyPrefix: 'gh_killed000', keyHash: 'h', scopes: ['events:write'], expiresAt: null };
const created = await store.createApiKey(key, null, new Date(), audit('api_key.created'));
await store.revokeApiKey(created.key.id, new Date(), audit('api_key.revoked'));
process.stdout.write('done\\n');
setInterval(() => {}, 60_000);
`;

describe('the embedded store under a crash', () => {
  it('keeps a created and a revoked key, with both events, when the process is killed right after', { timeout: 60_000 }, async () => {
    const dir = dataDir();
    await killHard(await runStoreScript(dir, CREATE_AND_REVOKE));
    // Killed with the store open: its changes are in the WAL, and its lock went with the process.
    expect(existsSync(join(dir, `${EMBEDDED_STORE_FILE}-wal`))).toBe(true);

    const store = await openStore({ dataDir: dir });
    try {
      const [key] = await store.listApiKeys();
      expect(key).toMatchObject({ keyPrefix: 'gh_killed000', revokedAt: expect.any(Date) });
      const events = await store.listAuditEvents({ limit: 10 });
      expect(events.map((event) => [event.action, event.subjectId])).toEqual([
        ['api_key.revoked', String(key!.id)],
        ['api_key.created', String(key!.id)],
      ]);
    } finally {
      await store.close();
    }
  });
});

describeWithPostgres('the embedded store and PostgreSQL, through exportData and importData', () => {
  it('copies SQLite → PostgreSQL → SQLite with every id, hash, timestamp and secret as it was', async () => {
    const database = await createTestDatabase();
    const embedded = await openStore({ dataDir: dataDir() });
    const postgres = await openStore({ databaseUrl: database.url, dataDir: 'unused', poolSize: 2 });
    const back = await openStore({ dataDir: dataDir() });
    try {
      const { admin } = await embedded.createAdmin('ops@example.com', '$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA');
      const created = await embedded.createApiKey(
        { name: 'copied', agentId: 7, keyPrefix: 'gh_copied000', keyHash: '$argon2id$hash', scopes: ['mcp:calls'], expiresAt: new Date('2031-02-03T04:05:06.789Z') },
        null,
        new Date('2030-01-01T00:00:00.123Z'),
        (row) => ({ action: 'api_key.created', actorKind: 'admin', actorId: String(admin.id), subjectId: String(row.id), clientAddress: '203.0.113.9', detail: { scopes: row.scopes } }),
      );
      if (!created.ok) throw new Error(created.reason);
      await embedded.recordKeyUses(new Map([[created.key.id, new Date('2030-01-02T00:00:00.456Z')]]));
      await embedded.getOrCreateSetting('jwt_secret', 'kept secret');
      const data: StoreData = await embedded.exportData();

      await postgres.importData(data);
      expect(await postgres.exportData()).toEqual(data);
      await back.importData(await postgres.exportData());
      expect(await back.exportData()).toEqual(data);
    } finally {
      await Promise.all([embedded.close(), postgres.close(), back.close()]);
      await database.drop();
    }
  });
});
