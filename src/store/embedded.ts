import { mkdir } from 'node:fs/promises';
import { resolve } from 'node:path';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import { lockEmbeddedStore } from './embedded-lock.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';

/**
 * PostgreSQL's default 128 MB of shared buffers lives in PGlite's WASM memory, in this process,
 * and is filled by the first reads of a large keys table: measured, it is most of the embedded
 * store's RSS. The gateway reads a key's row once per cold use and then serves it from its own
 * cache, and PGlite's files are ordinary files the OS caches anyway, so 8 MB is plenty.
 */
const EMBEDDED_SETTINGS = ['-c', 'shared_buffers=8MB'];

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
    db = await PGlite.create(path, { startParams: [...PGlite.defaultStartParams, ...EMBEDDED_SETTINGS] });
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
