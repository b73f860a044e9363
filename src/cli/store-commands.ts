import { existsSync, realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Env } from '../config/env.ts';
import { loadConfig } from '../config/load.ts';
import { StoreNotEmptyError, type Store, type StoreData } from '../store/store.ts';
import { createDatabase, isMissingDatabase } from '../store/create-database.ts';
import { redactDatabaseUrl } from '../store/database-url.ts';
import { describeReplacement, storableData } from '../store/storable-data.ts';
import { EXIT_OK, RefusedError, UsageError, requiredString, type Command } from './command.ts';
import { withStore } from './context.ts';
import { printJson } from './output.ts';

/** Where a store lives: a PostgreSQL database, or an embedded store's directory (as DATA_DIR). */
export type StoreLocation = { kind: 'postgres'; url: string } | { kind: 'embedded'; dir: string };

/**
 * `--to`: `postgres://…`/`postgresql://…`, a `file:` URL, or a directory path. Any other scheme
 * is refused rather than taken for a directory named `mysql:`.
 */
export function parseTarget(to: string): StoreLocation {
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(to)?.[1]?.toLowerCase();
  if (scheme === 'postgres' || scheme === 'postgresql') {
    // The URL itself is never echoed: it may hold a password.
    if (!URL.canParse(to)) throw new UsageError('--to is not a valid postgres:// URL');
    return { kind: 'postgres', url: to };
  }
  if (scheme === 'file') {
    try {
      return { kind: 'embedded', dir: resolve(fileURLToPath(to)) };
    } catch (error) {
      throw new UsageError(`--to: ${(error as Error).message}`);
    }
  }
  if (scheme !== undefined && /^[a-z][a-z0-9+.-]*:\/\//i.test(to)) {
    throw new UsageError(`--to: unsupported scheme '${scheme}:' (postgres://, postgresql://, file: or a directory)`);
  }
  return { kind: 'embedded', dir: resolve(to) };
}

export function sourceOf(env: Pick<Env, 'DATABASE_URL' | 'DATA_DIR'>): StoreLocation {
  return env.DATABASE_URL ? { kind: 'postgres', url: env.DATABASE_URL } : { kind: 'embedded', dir: resolve(env.DATA_DIR) };
}

/** For people: which store, never a password (`postgres://gh:***@db/gh`). */
export function describeLocation(location: StoreLocation): string {
  return location.kind === 'postgres' ? `PostgreSQL at ${redactDatabaseUrl(location.url)}` : `the embedded store in ${location.dir}`;
}

/**
 * The same store twice would be read and written at once: for an embedded directory that is
 * two instances on the same files in one process (the lock lets its own pid through).
 */
export function sameLocation(a: StoreLocation, b: StoreLocation): boolean {
  if (a.kind === 'embedded' && b.kind === 'embedded') return canonicalDir(a.dir) === canonicalDir(b.dir);
  if (a.kind === 'postgres' && b.kind === 'postgres') return databaseOf(a.url) === databaseOf(b.url);
  return false;
}

function canonicalDir(dir: string): string {
  return existsSync(dir) ? realpathSync(dir) : resolve(dir);
}

function databaseOf(url: string): string {
  const parsed = new URL(url);
  return `${parsed.hostname}:${parsed.port || '5432'}${parsed.pathname}`;
}

/** Removes a URL's password from a message, raw and decoded, in case a driver quoted it. */
function scrubber(location: StoreLocation): (text: string) => string {
  if (location.kind !== 'postgres') return (text) => text;
  const parsed = new URL(location.url);
  const secrets = [parsed.password, safeDecode(parsed.password), parsed.searchParams.get('password') ?? ''].filter((secret) => secret.length > 0);
  return (text) => secrets.reduce((scrubbed, secret) => scrubbed.replaceAll(secret, '***'), text);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export function counts(data: StoreData) {
  return { admins: data.admins.length, api_keys: data.apiKeys.length, audit_events: data.auditEvents.length, settings: data.settings.length };
}

/**
 * Opens the target as a gateway would (schema created or migrated) and imports into it; a
 * PostgreSQL database that does not exist yet is created first. The import is one transaction
 * that refuses a non-empty store, so a refusal or a failure leaves the target's data as it was.
 * Resolves with the name of the database it created, if it did.
 */
export async function importInto(target: StoreLocation, data: StoreData): Promise<{ createdDatabase?: string }> {
  const scrub = scrubber(target);
  let store: Store;
  let createdDatabase: string | undefined;
  try {
    store = await openTarget(target);
  } catch (error) {
    if (target.kind !== 'postgres' || !isMissingDatabase(error)) throw new RefusedError('store_unavailable', `--to: ${scrub(messageOf(error))}`);
    try {
      createdDatabase = await createDatabase(target.url);
      store = await openTarget(target);
    } catch (failure) {
      throw new RefusedError('store_unavailable', `--to: the database does not exist and could not be created: ${scrub(messageOf(failure))}`);
    }
  }
  try {
    await store.importData(data);
  } catch (error) {
    if (error instanceof StoreNotEmptyError) throw new RefusedError('store_not_empty', `${error.message}; nothing was written`);
    throw new RefusedError('copy_failed', `cannot copy into ${describeLocation(target)}, nothing was written: ${scrub(messageOf(error))}`);
  } finally {
    await store.close();
  }
  return createdDatabase === undefined ? {} : { createdDatabase };
}

/** The target, opened as a gateway opens its store; the driver's message names it (its URL redacted, or the directory). */
async function openTarget(target: StoreLocation): Promise<Store> {
  const { openStore } = await import('../store/open.ts');
  return openStore(target.kind === 'postgres' ? { databaseUrl: target.url, dataDir: '', poolSize: 2 } : { dataDir: target.dir, poolSize: 2 });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export const storeCopy: Command = {
  name: 'store copy',
  summary: 'Copy everything in the configured store into another, empty store.',
  synopsis: '--to <postgres-url | directory> [--json]',
  description: [
    'Copies the admins (with their password hashes), the API keys (with their hashes), the audit',
    'trail and the stored settings (the JWT signing secret among them), ids kept: every key and',
    'every unexpired admin token works on a gateway started on the target. The configured store',
    '(DATABASE_URL, else DATA_DIR) is only read.',
    'The target is PostgreSQL (postgres://…) or an embedded store in a directory (a path or a file:',
    'URL, as DATA_DIR). A missing PostgreSQL database is created (the URL\'s user needs CREATEDB), a',
    'missing directory too, and its schema; a target holding any data is refused, and',
    'the copy is one transaction: on a refusal or a failure no data is written to it.',
    'An embedded source is read beside its running gateway (one consistent snapshot); changes made',
    'after the copy began are not in it.',
    'A string the gateway no longer accepts (a NUL, which an embedded SQLite store written by an',
    '8.1 pre-release may hold in a key\'s name) is copied with U+FFFD in place of that character, one line on stderr',
    'naming the record and field (with --json, also in "replaced").',
  ],
  options: { to: { type: 'string' }, json: { type: 'boolean' } },
  optionHelp: { to: 'the target: postgres://… or postgresql://…, a directory, or a file: URL (required)', json: 'print JSON' },
  async run(io, args) {
    const target = parseTarget(requiredString(args, 'to'));
    // Checked before the source opens: a refusal costs nothing and touches nothing.
    const config = loadConfig(io.env);
    const source = sourceOf(config.env);
    if (sameLocation(source, target)) throw new RefusedError('same_store', `--to is the configured store itself (${describeLocation(source)})`);
    return withStore(io.env, async (context) => {
      const { data, replaced } = storableData(await context.store.exportData());
      const { createdDatabase } = await importInto(target, data);
      for (const replacement of replaced) {
        io.stderr.write(`gatehouse: ${describeReplacement(replacement)} held a character no store can keep (NUL or a lone surrogate): copied with U+FFFD in its place\n`);
      }
      const copied = counts(data);
      if (args.values.json) {
        printJson(io, { from: describeLocation(source), to: describeLocation(target), ...(createdDatabase === undefined ? {} : { created_database: createdDatabase }), copied, replaced });
      } else {
        if (createdDatabase !== undefined) io.stdout.write(`created the PostgreSQL database "${createdDatabase}"\n`);
        io.stdout.write(
          `copied ${copied.admins} admin(s), ${copied.api_keys} API key(s), ${copied.audit_events} audit event(s) and ` +
            `${copied.settings} setting(s) from ${describeLocation(source)} to ${describeLocation(target)}\n`,
        );
      }
      return EXIT_OK;
    }, config, { readOnly: true });
  },
};
