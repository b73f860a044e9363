import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EMBEDDED_STORE_FILE, openEmbeddedDatabase } from '../../src/store/embedded.ts';
import { migrateSqlite } from '../../src/store/sqlite/migrate.ts';
import { SqliteStore } from '../../src/store/sqlite-store.ts';

const dataDir = () => mkdtempSync(join(tmpdir(), 'gatehouse-embedded-'));

describe('the embedded store (SQLite)', () => {
  it('is one file in DATA_DIR, in WAL mode, synced on every commit, with foreign keys, a short busy timeout and a small WAL', () => {
    const dir = dataDir();
    const { db, release } = openEmbeddedDatabase(dir);
    try {
      expect(existsSync(join(dir, EMBEDDED_STORE_FILE))).toBe(true);
      const pragma = (name: string) => Object.values(db.prepare(`PRAGMA ${name}`).get() ?? {})[0];
      expect(pragma('journal_mode')).toBe('wal');
      // 2: FULL (docs/adr/0021-embedded-store-sqlite.md).
      expect(pragma('synchronous')).toBe(2);
      expect(pragma('foreign_keys')).toBe(1);
      expect(pragma('busy_timeout')).toBe(1000);
      // The WAL bounded for small volumes (docs/adr/0029-data-dir-lock-and-store-files.md).
      expect(pragma('wal_autocheckpoint')).toBe(128);
      expect(pragma('journal_size_limit')).toBe(524_288);
    } finally {
      db.close();
      release();
    }
  });

  it('writes last_used_at without a sync of its own and goes back to FULL for the next change', async () => {
    const { db, release } = openEmbeddedDatabase(dataDir());
    migrateSqlite(db);
    const store = new SqliteStore(db, release);
    try {
      const created = await store.createApiKey(
        { name: 'k', agentId: null, keyPrefix: 'gh_settings0', keyHash: 'h', scopes: [], expiresAt: null },
        null,
        new Date(),
      );
      if (!created.ok) throw new Error(created.reason);
      // A trigger on the write itself reads the setting it runs under.
      const seen: number[] = [];
      db.function('observe_synchronous', () => {
        seen.push(Number(db.prepare('PRAGMA synchronous').get()?.synchronous));
        return null;
      });
      db.exec('CREATE TEMP TRIGGER observe AFTER UPDATE OF last_used_at ON api_keys BEGIN SELECT observe_synchronous(); END');
      await store.recordKeyUses(new Map([[created.key.id, new Date()]]));
      expect(seen).toEqual([1]);
      expect(db.prepare('PRAGMA synchronous').get()?.synchronous).toBe(2);
      expect((await store.findApiKeyById(created.key.id))?.lastUsedAt).toBeInstanceOf(Date);
    } finally {
      await store.close();
    }
  });
});
