import type { DatabaseSync } from 'node:sqlite';
import { decideWriter } from '../written-by.ts';
import { inTransaction } from './transaction.ts';

/**
 * Checks the file's record of the newest release that wrote it against `running` and moves it
 * forward (src/store/written-by.ts). `write: false` (a snapshot only read): checked alone.
 */
export function recordSqliteWriter(db: DatabaseSync, running: string, write = true, now = Date.now): void {
  const check = () => decideWriter(readWriter(db), running);
  if (!write) {
    check();
    return;
  }
  inTransaction(db, () => {
    if (check() === 'keep') return;
    db.prepare(
      `INSERT INTO store_version (id, written_by, written_at) VALUES (1, ?, ?)
       ON CONFLICT (id) DO UPDATE SET written_by = excluded.written_by, written_at = excluded.written_at`,
    ).run(running, now());
  });
}

function readWriter(db: DatabaseSync): string | null {
  // Before the migration that creates it (a store of an earlier release): no record.
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_version'").get() === undefined) return null;
  const row = db.prepare('SELECT written_by FROM store_version WHERE id = 1').get();
  return row === undefined ? null : String(row.written_by);
}
