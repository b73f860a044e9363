import { loadConfig } from '../config/load.ts';
import { PGLITE_BACKUP_DIR } from '../store/pglite-data-dir.ts';
import type { PgliteStoreReader, UpgradeResult } from '../store/upgrade-data-dir.ts';
import { EXIT_OK, RefusedError, type CliIo, type Command } from './command.ts';
import { printJson } from './output.ts';
import { counts } from './store-commands.ts';

/**
 * PGlite, loaded here and nowhere else, when the command runs: a gateway and every other
 * command never load it (src/store/pglite-reader.ts).
 */
async function pgliteReader(): Promise<PgliteStoreReader> {
  const { loadPglite, readPgliteStore, PgliteMissingError } = await import('../store/pglite-reader.ts');
  try {
    const PGlite = await loadPglite();
    return (dir) => readPgliteStore(dir, PGlite);
  } catch (error) {
    if (error instanceof PgliteMissingError) throw new RefusedError('missing_dependency', error.message);
    throw error;
  }
}

export const storeUpgrade: Command = {
  name: 'store upgrade',
  summary: 'Convert an embedded store written by Gatehouse 8.0 (PGlite) into this build\'s, in place.',
  synopsis: '[--force] [--json]',
  description: [
    'Converts the 8.0 store in DATA_DIR (its pglite/ directory) into this build\'s SQLite store,',
    'keeping everything it holds, ids included: admins (their password hashes), API keys (their',
    'hashes, scopes, agents, expiry, revocation, last use), the audit trail and the stored secrets',
    '(the JWT signing secret among them): every key and unexpired admin token keeps working.',
    'Run it once with the gateway stopped (it refuses while an 8.0 gateway runs on DATA_DIR). A',
    'DATA_DIR/pglite.lock whose process it cannot see (in another container, or gone) is refused',
    'too: once you know no 8.0 gateway runs, run it again with --force to take the lock over. The',
    'new store is written beside the old one and read back before anything moves; the 8.0 files',
    `are then kept, untouched, in DATA_DIR/${PGLITE_BACKUP_DIR}: delete it once the gateway runs`,
    'well on the new store. A DATA_DIR that holds this build\'s store already is left as it is.',
    'Needs the optional package @electric-sql/pglite (installed by npm ci unless --omit=optional).',
    'A PostgreSQL store (DATABASE_URL) needs no command: it is migrated when the gateway starts.',
  ],
  options: { force: { type: 'boolean' }, json: { type: 'boolean' } },
  optionHelp: { force: 'take over a pglite.lock left behind: only once you know no 8.0 gateway runs on DATA_DIR', json: 'print JSON' },
  async run(io, args) {
    const { env } = loadConfig(io.env);
    if (env.DATABASE_URL) {
      throw new RefusedError('nothing_to_upgrade', 'DATABASE_URL is set: a PostgreSQL store is migrated when the gateway starts, there is nothing to convert');
    }
    const { upgradeDataDir, UpgradeRefusedError } = await import('../store/upgrade-data-dir.ts');
    let result: UpgradeResult;
    try {
      result = await upgradeDataDir(env.DATA_DIR, pgliteReader, args.values.force === true);
    } catch (error) {
      if (error instanceof UpgradeRefusedError) throw new RefusedError(error.code, `DATA_DIR: ${error.message}`);
      if (error instanceof RefusedError) throw error;
      throw new RefusedError('upgrade_failed', `DATA_DIR: ${error instanceof Error ? error.message : String(error)}`);
    }
    report(io, result, args.values.json === true);
    return EXIT_OK;
  },
};

function report(io: CliIo, result: UpgradeResult, json: boolean): void {
  if (json) {
    printJson(io, result.outcome === 'upgraded' ? { outcome: result.outcome, dir: result.dir, backup: result.backup, copied: counts(result.data) } : result);
    return;
  }
  if (result.outcome === 'current') {
    io.stdout.write(`${result.dir} holds this build's store already: nothing to upgrade\n`);
    return;
  }
  const copied = counts(result.data);
  io.stdout.write(
    `upgraded the Gatehouse 8.0 store in ${result.dir}: ${copied.admins} admin(s), ${copied.api_keys} API key(s), ` +
      `${copied.audit_events} audit event(s) and ${copied.settings} setting(s) kept; the 8.0 files are in ${result.backup} ` +
      '(delete it once the gateway runs well on the new store)\n',
  );
}
