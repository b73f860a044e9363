import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { describe, inject } from 'vitest';

/** PostgreSQL resolved by global-setup.ts, or null when the run has none. */
export function postgresUrl(): string | null {
  return inject('postgresUrl');
}

/** Redis resolved by global-setup.ts, or null when the run has none. */
export function redisUrl(): string | null {
  return inject('redisUrl');
}

/** A suite that is skipped (global-setup said so, loudly) when the run has no PostgreSQL. */
export function describeWithPostgres(name: string, fn: () => void): void {
  describe.skipIf(postgresUrl() === null)(name, fn);
}

/** A suite that is skipped (global-setup said so, loudly) when the run has no Redis. */
export function describeWithRedis(name: string, fn: () => void): void {
  describe.skipIf(redisUrl() === null)(name, fn);
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh, uniquely named database on the test server, so parallel test files never share
 * tables. `drop()` removes it even if connections are still open.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = postgresUrl();
  if (serverUrl === null) throw new Error('createTestDatabase() needs PostgreSQL: use describeWithPostgres');
  const name = `gh_t_${randomBytes(6).toString('hex')}`;
  await onServer(serverUrl, `CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

async function onServer(serverUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}
