import pg from 'pg';
import { redactDatabaseUrl } from './database-url.ts';
import type { SqlExecutor, SqlSession } from './sql.ts';

// Ids and counts are int8; pg returns them as strings by default. Ours never near 2^53, so
// numbers. Local to our pool: the global pg.types registry is left alone.
const types: pg.CustomTypesConfig = {
  getTypeParser: (id, format) => (id === pg.types.builtins.INT8 ? Number : pg.types.getTypeParser(id, format)),
};

/** A pool on `url`, checked with one round trip. Rejects without ever showing the URL's password. */
export async function connectPostgres(url: string, poolSize: number): Promise<SqlExecutor> {
  let password: string;
  try {
    password = decodeURIComponent(new URL(url).password);
  } catch {
    throw new Error('DATABASE_URL is not a valid postgres:// URL');
  }
  const pool = new pg.Pool({ connectionString: url, max: poolSize, types, connectionTimeoutMillis: 10_000 });
  // An idle connection that dies (server restart) is dropped by the pool; the next query
  // reports the failure. Without a listener the 'error' event would crash the process.
  pool.on('error', () => {});
  try {
    await pool.query('SELECT 1');
  } catch (error) {
    await pool.end().catch(() => {});
    const reason = error instanceof Error ? error.message : String(error);
    const scrub = (text: string) => (password ? text.replaceAll(password, '***') : text);
    throw new Error(`cannot connect to PostgreSQL at ${scrub(redactDatabaseUrl(url))}: ${scrub(reason)}`, { cause: error });
  }
  return {
    kind: 'postgres',
    ...session(pool),
    async transaction(fn) {
      const client = await pool.connect();
      let broken = false;
      try {
        await client.query('BEGIN');
        const result = await fn(session(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        // A failed ROLLBACK means the connection is unusable: destroy it rather than pool it.
        await client.query('ROLLBACK').catch(() => (broken = true));
        throw error;
      } finally {
        client.release(broken);
      }
    },
    close: () => pool.end(),
  };
}

function session(on: pg.Pool | pg.PoolClient): SqlSession {
  return {
    async query<R>(text: string, params: readonly unknown[] = []) {
      return (await on.query(text, [...params])).rows as R[];
    },
    async exec(script) {
      // Without parameters pg uses the simple protocol, which accepts several statements.
      await on.query(script);
    },
  };
}
