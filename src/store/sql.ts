/**
 * The little the shared store code needs from a database: PostgreSQL (pg Pool) and PGlite
 * both provide it, so schema, migrations and queries are written once.
 */
export interface SqlSession {
  /** One statement with `$n` parameters; rows with int8 already turned into numbers. */
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<R[]>;
  /** A script of several statements without parameters (migrations). */
  exec(script: string): Promise<void>;
}

export interface SqlExecutor extends SqlSession {
  readonly kind: 'postgres' | 'embedded';
  /** Runs `fn` in BEGIN … COMMIT on one connection; rolls back and rethrows if it throws. */
  transaction<T>(fn: (tx: SqlSession) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}
