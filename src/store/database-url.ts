/**
 * A database URL as it may be shown: its password masked (`postgres://gh:***@db/gh`), and the
 * parameters libpq also takes a secret in (`?password=…`, `sslkey=…`). Throws on a string that
 * is not a URL. The one place a URL is made safe to print: logs, errors, the CLI.
 */
export function redactDatabaseUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  for (const name of [...parsed.searchParams.keys()]) if (/pass|secret|key/i.test(name)) parsed.searchParams.set(name, '***');
  return parsed.toString();
}
