import { isatty } from 'node:tty';
import { build } from './app.ts';
import { ensureAdmin } from './admin/bootstrap.ts';
import { interactiveTerminal } from './admin/interactive-terminal.ts';
import { ConfigError, loadConfig } from './config/load.ts';
import { describeMisspelling, misspelledVariables } from './config/misspelled-variables.ts';
import { buildOpsServer, type OpsState } from './ops/ops-server.ts';
import { openFilesLimit, openFilesWarning } from './ops/open-files-limit.ts';
import { openStore } from './store/open.ts';
import type { Store } from './store/store.ts';
import { guardStore } from './store/unavailable.ts';

/** The whole shutdown, at most; past it the process exits 1 whatever is left. */
const SHUTDOWN_GRACE_MS = 10_000;
/** In-flight requests and streams get this long to finish before their connections are closed. */
const DRAIN_MS = 8_000;

/** The process: configuration, store, listeners, signals. Everything else is built by `build()`. */
export async function serve(environment: Record<string, string | undefined> = process.env): Promise<void> {
  const config = loadConfig(environment);
  const { env } = config;
  // The ops listener first: while the store opens and migrates, /readyz answers 503 `starting`.
  const state: OpsState = { draining: false };
  const ops = buildOpsServer({ state });
  await listenOrExplain(() => ops.server.listen({ port: env.OPS_PORT, host: env.HOST }), 'OPS_PORT', env.OPS_PORT);
  let store: Store;
  // Logged once the logger exists, below.
  const storeWarnings: string[] = [];
  try {
    // Guarded: while the database is unreachable, requests that need it answer 503 store_unavailable.
    store = guardStore(await openStore({ databaseUrl: env.DATABASE_URL, dataDir: env.DATA_DIR, warn: (message) => storeWarnings.push(message) }));
  } catch (error) {
    throw new ConfigError(`${env.DATABASE_URL ? 'DATABASE_URL' : 'DATA_DIR'}: cannot open the store: ${(error as Error).message}`);
  }
  const gateway = await build(config, { store });
  const { app } = gateway;
  // A mistyped name is otherwise ignored in silence: its default applies. Names only, never a value.
  for (const misspelling of misspelledVariables(environment)) {
    app.log.warn({ event: 'unknown_variable', variable: misspelling.variable, meant: misspelling.meant }, describeMisspelling(misspelling));
  }
  for (const warning of storeWarnings) app.log.warn(warning);
  // A generated password is shown only on an interactive terminal: other output is a log stream.
  // isatty(0), not process.stdin: the server never reads stdin, so it opens no stream on it.
  const terminal = interactiveTerminal({ isTTY: isatty(0) }, process.stdout);
  await ensureAdmin(store, gateway.hasher, { email: env.ADMIN_EMAIL, password: env.ADMIN_PASSWORD }, {
    info: (message) => app.log.info(message),
    warn: (message) => app.log.warn(message),
    ...(terminal ? { terminal } : {}),
  }, gateway.initialPassword);

  const descriptors = openFilesWarning(env.MAX_CONNECTIONS, openFilesLimit());
  if (descriptors !== undefined) app.log.warn(descriptors);
  gateway.metrics.setDependencyUp('store', true);
  await listenOrExplain(() => gateway.listen(env.PORT, env.HOST), 'PORT', env.PORT);
  ops.serving({ store, metrics: gateway.metrics, redis: gateway.redis, fromMemory: gateway.fromMemory });

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    state.draining = true;
    app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS);
    timer.unref();
    // In-flight requests (streams included) finish within DRAIN_MS; then the last uses are written.
    const drainLimit = setTimeout(() => gateway.closeAllConnections(), DRAIN_MS);
    await app.close();
    clearTimeout(drainLimit);
    await gateway.usage.close().catch((error: unknown) => app.log.error({ err: error }, 'could not write the last key uses'));
    await ops.server.close();
    await store.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

async function listenOrExplain(listen: () => Promise<unknown>, variable: string, port: number): Promise<void> {
  try {
    await listen();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ConfigError(`${variable}: port ${port} is already in use`);
    if (code === 'EACCES') throw new ConfigError(`${variable}: not allowed to listen on port ${port}`);
    throw error;
  }
}

if (import.meta.main) {
  serve().catch((error: unknown) => {
    const message = error instanceof ConfigError ? error.message : `startup failed: ${(error as Error).message}`;
    process.stderr.write(`gatehouse: ${message}\n`);
    process.exit(1);
  });
}
