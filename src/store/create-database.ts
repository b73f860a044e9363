import pg from 'pg';

/** PostgreSQL's SQLSTATEs: the database named in the URL does not exist; it exists already. */
const INVALID_CATALOG_NAME = '3D000';
const DUPLICATE_DATABASE = '42P04';
/** The database every PostgreSQL cluster has for connecting when the one wanted does not exist yet. */
const MAINTENANCE_DATABASE = 'postgres';

/** Whether opening a store failed because its database does not exist (anywhere in the error's causes). */
export function isMissingDatabase(error: unknown): boolean {
  for (let at: unknown = error; at instanceof Error; at = at.cause) {
    if ((at as { code?: unknown }).code === INVALID_CATALOG_NAME) return true;
  }
  return false;
}

/**
 * Creates the database `url` names, through the same server's maintenance database with the
 * URL's own user and settings (it needs the CREATEDB privilege). The name is quoted as an
 * identifier (`pg.escapeIdentifier`), so any name the URL can hold is created exactly as
 * written. A database created meanwhile by someone else counts as created. Resolves with its name.
 */
export async function createDatabase(url: string): Promise<string> {
  const parsed = new URL(url);
  const name = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (name === '') throw new Error('the URL names no database');
  parsed.pathname = `/${MAINTENANCE_DATABASE}`;
  const client = new pg.Client({ connectionString: parsed.toString(), connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } catch (error) {
    if ((error as { code?: unknown }).code !== DUPLICATE_DATABASE) throw error;
  } finally {
    await client.end().catch(() => {});
  }
  return name;
}
