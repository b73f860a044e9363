import type { SqlExecutor } from './sql.ts';
import { decideWriter } from './written-by.ts';

/**
 * Checks PostgreSQL's record of the newest release that wrote it against `running` and moves
 * it forward (src/store/written-by.ts). Replicas starting together take an advisory lock in
 * turn (a row lock cannot hold a row not yet inserted), so an older replica never moves the
 * record backwards over a newer one that started beside it.
 * `write: false` (a store only read): checked, never written.
 */
export async function recordPostgresWriter(db: SqlExecutor, running: string, write = true): Promise<void> {
  await db.transaction(async (tx) => {
    if (write) await tx.query(`SELECT pg_advisory_xact_lock(hashtext('gatehouse.store_version'))`);
    // Before the migration that creates it (a store of an earlier release): no record.
    const [table] = await tx.query<{ present: boolean }>(`SELECT to_regclass('store_version') IS NOT NULL AS present`);
    const [row] = table?.present === true ? await tx.query<{ written_by: string }>('SELECT written_by FROM store_version') : [];
    const decision = decideWriter(row?.written_by ?? null, running);
    if (!write || decision === 'keep') return;
    await tx.query(
      `INSERT INTO store_version (id, written_by, written_at) VALUES (true, $1, now())
       ON CONFLICT (id) DO UPDATE SET written_by = EXCLUDED.written_by, written_at = EXCLUDED.written_at`,
      [running],
    );
  });
}
