import { migrations as allMigrations, type Migration } from './migrations/index.ts';
import type { SqlExecutor } from './sql.ts';

/**
 * Applies pending migrations in one transaction and returns the versions it applied.
 * Replicas starting together against one PostgreSQL queue on a transaction-scoped advisory
 * lock: the first applies, the others then find nothing pending.
 */
export async function migrate(db: SqlExecutor, migrations: readonly Migration[] = allMigrations): Promise<number[]> {
  return db.transaction(async (tx) => {
    // Taken before CREATE TABLE IF NOT EXISTS, which itself races between sessions.
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext('gatehouse.migrate'))`);
    await tx.exec(`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
    const rows = await tx.query<{ version: number }>('SELECT version FROM schema_migrations');
    const applied = new Set(rows.map((row) => row.version));
    const pending = migrations.filter((m) => !applied.has(m.version)).toSorted((a, b) => a.version - b.version);
    for (const migration of pending) {
      await tx.exec(migration.sql);
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
    }
    return pending.map((m) => m.version);
  });
}

/** Refuses a database that is not a Gatehouse store at exactly this build's schema (a store only to be read). */
export async function assertCurrentSchema(db: SqlExecutor, migrations: readonly Migration[] = allMigrations): Promise<void> {
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const [table] = await db.query<{ present: boolean }>(`SELECT to_regclass('schema_migrations') IS NOT NULL AS present`);
  if (table?.present !== true) throw new Error('the database holds no Gatehouse store');
  const [row] = await db.query<{ version: number | null }>('SELECT max(version) AS version FROM schema_migrations');
  if ((row?.version ?? 0) !== known) {
    throw new Error(`the store's schema is version ${row?.version ?? 0}, this build's is ${known}: start this build's gateway on it once, then copy`);
  }
}
