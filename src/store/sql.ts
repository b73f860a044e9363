/**
 * The little PostgresStore and its migrations need from PostgreSQL (a pg Pool): queries,
 * scripts and transactions on one connection. The embedded store speaks SQLite's own SQL
 * through `node:sqlite` (src/store/sqlite-store.ts) and does not use it.
 */
export interface SqlSession {
  /** One statement with `$n` parameters; rows with int8 already turned into numbers. */
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<R[]>;
  /** A script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

export interface SqlExecutor extends SqlSession {
  readonly kind: 'postgres';
  /** Runs `fn` in BEGIN … COMMIT on one connection; rolls back and rethrows if it throws. */
  transaction<T>(fn: (tx: SqlSession) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
