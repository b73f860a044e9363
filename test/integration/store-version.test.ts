import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EMBEDDED_STORE_FILE } from '../../src/store/embedded.ts';
import { openStore, type OpenStoreOptions } from '../../src/store/open.ts';
import { VERSION } from '../../src/version.ts';
import { createTestDatabase, describeWithPostgres, type TestDatabase } from '../support/services.ts';

/** Reads and writes a store's record of its newest writer from outside, as another release would have left it. */
interface Record {
  read(): Promise<string | null>;
  write(version: string): Promise<void>;
}

function sqliteRecord(dir: string): Record {
  const on = <T>(fn: (db: DatabaseSync) => T): T => {
    const db = new DatabaseSync(join(dir, EMBEDDED_STORE_FILE));
    try {
      return fn(db);
    } finally {
      db.close();
    }
  };
  return {
    read: async () => on((db) => (db.prepare('SELECT written_by FROM store_version').get()?.written_by as string | undefined) ?? null),
    write: async (version) => void on((db) => db.prepare('UPDATE store_version SET written_by = ?').run(version)),
  };
}

function postgresRecord(url: string): Record {
  const on = async <T>(fn: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  };
  return {
    read: () => on(async (client) => ((await client.query('SELECT written_by FROM store_version')).rows[0]?.written_by as string | undefined) ?? null),
    write: (version) => on(async (client) => void (await client.query('UPDATE store_version SET written_by = $1', [version]))),
  };
}

function contract(setup: () => Promise<{ options: OpenStoreOptions; record: Record; done(): Promise<void> }>): void {
  let options: OpenStoreOptions;
  let record: Record;
  let done: () => Promise<void>;
  beforeEach(async () => {
    ({ options, record, done } = await setup());
    await (await openStore(options)).close();
  });
  afterEach(async () => done());

  it('records the running release when the store is opened', async () => {
    expect(VERSION).toBe('8.1.0');
    expect(await record.read()).toBe(VERSION);
  });

  it('moves an older release\'s record forward, and opens', async () => {
    await record.write('8.0.3');
    const store = await openStore(options);
    expect(await store.countAdmins()).toBe(0);
    await store.close();
    expect(await record.read()).toBe(VERSION);
  });

  it('refuses a store a newer release wrote, in one line naming both, and leaves the record as it was', async () => {
    await record.write('8.2.0');
    const error: unknown = await openStore(options).catch((caught: unknown) => caught);
    expect((error as Error).message).toBe(
      `the store was written by Gatehouse 8.2.0, this is Gatehouse ${VERSION}: an older release cannot run on it ` +
        '(no downgrade: run 8.2.0 or later, docs/deploying.md, "Upgrading")',
    );
    await expect(openStore({ ...options, readOnly: true })).rejects.toThrow('the store was written by Gatehouse 8.2.0');
    expect(await record.read()).toBe('8.2.0');
  });

  it('reads a store only to be read without writing its record', async () => {
    await record.write('8.0.9');
    await (await openStore({ ...options, readOnly: true })).close();
    expect(await record.read()).toBe('8.0.9');
  });
}

describe('the record of the newest release that wrote the store: SQLite', () => {
  contract(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-version-'));
    return { options: { dataDir: dir }, record: sqliteRecord(dir), done: async () => {} };
  });
});

describeWithPostgres('the record of the newest release that wrote the store: PostgreSQL', () => {
  contract(async () => {
    const database: TestDatabase = await createTestDatabase();
    return { options: { databaseUrl: database.url, dataDir: '', poolSize: 2 }, record: postgresRecord(database.url), done: () => database.drop() };
  });
});
