import { userInfo } from 'node:os';
import type { AuditAction } from '../audit/audit-trail.ts';
import { ConfigError, loadConfig, type Config } from '../config/load.ts';
import { Argon2Hasher } from '../crypto/argon2.ts';
import type { Actor } from '../keys/key-service.ts';
import type { AuditOf, Store } from '../store/store.ts';

/** What a command that works on the store gets: the gateway's own config, store and hasher. */
export interface StoreContext {
  config: Config;
  store: Store;
  hasher: Argon2Hasher;
  now: () => Date;
  /** The operator, for audit events: `actor_kind: cli` and the OS user. */
  actor: Actor;
  /**
   * The event of a change this command makes, about the changed row, for the store to write in
   * the change's own transaction: a change is never kept without its event (issue 22, item 4).
   */
  auditOf<T extends { id: number }>(action: AuditAction): AuditOf<T>;
}

/**
 * Opens the configured store exactly as `gatehouse serve` would (same variables, same
 * migrations), runs `fn`, and closes it whatever happens. `config` when the caller has loaded it
 * already (to refuse bad input before paying for the store).
 */
export async function withStore<T>(
  env: Record<string, string | undefined>,
  fn: (context: StoreContext) => Promise<T>,
  config: Config = loadConfig(env),
  access: { readOnly?: boolean } = {},
): Promise<T> {
  const { env: settings } = config;
  let store: Store;
  try {
    // Loaded here, not at the top: `--help` and usage errors need neither node:sqlite nor pg.
    const { openStore } = await import('../store/open.ts');
    store = await openStore({
      databaseUrl: settings.DATABASE_URL,
      dataDir: settings.DATA_DIR,
      poolSize: 2,
      warn: (message) => void process.stderr.write(`gatehouse: ${message}\n`),
      ...access,
    });
  } catch (error) {
    throw new ConfigError(`${settings.DATABASE_URL ? 'DATABASE_URL' : 'DATA_DIR'}: cannot open the store: ${(error as Error).message}`);
  }
  const hasher = hasherFor(config);
  const actor: Actor = { kind: 'cli', id: operatingSystemUser(), address: null };
  try {
    return await fn({
      config,
      store,
      hasher,
      now: () => new Date(),
      actor,
      auditOf: (action) => (row) => ({
        action,
        actorKind: actor.kind,
        actorId: actor.id,
        subjectId: String(row.id),
        clientAddress: actor.address,
        detail: {},
      }),
    });
  } finally {
    await store.close();
  }
}

export function hasherFor(config: Pick<Config, 'env'>): Argon2Hasher {
  const { env } = config;
  return new Argon2Hasher({
    memoryKiB: env.ARGON2_MEMORY_KIB,
    timeCost: env.ARGON2_TIME_COST,
    parallelism: env.ARGON2_PARALLELISM,
    concurrency: env.ARGON2_CONCURRENCY,
  });
}

/** Who ran the command, for the audit trail: the login name, or the uid where there is none (containers). */
function operatingSystemUser(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid:${process.getuid?.() ?? 'unknown'}`;
  }
}
