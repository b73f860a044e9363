import type { DatabaseSync } from 'node:sqlite';
import { sqliteMigrations, type SqliteMigration } from './migrations.ts';
import { inTransaction } from './transaction.ts';

/**
 * Applies the pending migrations in one transaction and returns the versions it applied. A
 * file migrated by a newer Gatehouse is refused: this build would misread a schema it does
 * not know, and an older build must not write to it.
 */
export function migrateSqlite(db: DatabaseSync, migrations: readonly SqliteMigration[] = sqliteMigrations, now = Date.now): number[] {
  return inTransaction(db, () => {
    db.exec(`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at INTEGER NOT NULL
      ) STRICT`);
    const applied = new Set(db.prepare('SELECT version FROM schema_migrations').all().map((row) => Number(row.version)));
    const known = Math.max(0, ...migrations.map((m) => m.version));
    const newest = Math.max(0, ...applied);
    if (newest > known) {
      throw new Error(`the store's schema is version ${newest}, from a newer Gatehouse (this build knows up to ${known}): run that build or a later one`);
    }
    const pending = migrations.filter((m) => !applied.has(m.version)).toSorted((a, b) => a.version - b.version);
    const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
    for (const migration of pending) {
      db.exec(migration.sql);
      record.run(migration.version, migration.name, now());
    }
    return pending.map((m) => m.version);
  });
}

/** Whether `db`'s schema is exactly this build's: a store read without migrating must be. */
export function schemaIsCurrent(db: DatabaseSync, migrations: readonly SqliteMigration[] = sqliteMigrations): boolean {
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const row = db.prepare("SELECT max(version) AS version FROM schema_migrations").get();
  return Number(row?.version ?? 0) === known;
}
