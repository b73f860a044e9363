import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { lockEmbeddedStore } from './embedded-lock.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';

/**
 * PGlite (PostgreSQL in WASM, in process) with its files under `dir`. PGlite runs one query
 * or transaction at a time behind its own mutex, so concurrent transactions are serialised.
 * One process only: two processes must never open the same directory.
 */
export async function openEmbedded(dir: string): Promise<SqlExecutor> {
  const path = resolve(dir);
  await mkdir(path, { recursive: true });
  const release = lockEmbeddedStore(path);
  let db: PGlite;
  try {
    db = await PGlite.create(path);
  } catch (error) {
    release();
    throw error;
  }
  return {
    kind: 'embedded',
    ...session(db),
    transaction: (fn) => db.transaction((tx) => fn(session(tx))),
    close: async () => {
      await db.close();
      release();
    },
  };
}

function session(on: PGlite | Transaction): SqlSession {
  return {
    async query<R>(text: string, params: readonly unknown[] = []) {
      return (await on.query<R>(text, [...params])).rows;
    },
    async exec(script) {
      await on.exec(script);
    },
  };
}
