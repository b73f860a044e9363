import type { AddressInfo } from 'node:net';
import { ensureAdmin } from '../../src/admin/bootstrap.ts';
import { build, type Gateway } from '../../src/app.ts';
import { loadConfig } from '../../src/config/load.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, FAST_ARGON2, REPO_ROOT, tempDataDir } from './gateway-process.ts';
import { createKey, loginAdmin } from './http.ts';

/**
 * The gateway's clock in a test (`build()`'s `deps.now`): real time plus an offset that only the
 * test moves. Moving it is how time passes for expiry; the gateway's own timers still run.
 */
export class TestClock {
  #offset = 0;
  readonly now = (): Date => new Date(Date.now() + this.#offset);
  advance(ms: number): void {
    this.#offset += ms;
  }
  /** Moves the clock on to `at` (epoch ms). */
  advanceTo(at: number): void {
    this.advance(at - this.now().getTime());
  }
}

export interface InProcessGateway {
  /** The public listener, `http://127.0.0.1:<port>`. */
  url: string;
  gateway: Gateway;
  store: Store;
  /** Logs the admin in (at the gateway's current time) and creates a key through the API. */
  key(body?: Record<string, unknown>): Promise<{ key: string; id: number }>;
  close(): Promise<void>;
}

/**
 * The gateway built in this process with `build()`, on a fresh embedded store, its clock `now`,
 * listening on a free port: for tests that move time, which a spawned gateway cannot.
 */
export async function startInProcessGateway(env: Record<string, string>, now: () => Date): Promise<InProcessGateway> {
  const config = loadConfig({ CONFIG_DIR: `${REPO_ROOT}config`, LOG_LEVEL: 'silent', ...FAST_ARGON2, ...env });
  const store = await openStore({ dataDir: tempDataDir() });
  let gateway: Gateway;
  try {
    gateway = await build(config, { store, now });
    const quiet = () => {};
    await ensureAdmin(store, gateway.hasher, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD }, { info: quiet, warn: quiet }, gateway.initialPassword);
    await gateway.app.listen({ port: 0, host: '127.0.0.1' });
  } catch (error) {
    await store.close();
    throw error;
  }
  const url = `http://127.0.0.1:${(gateway.app.server.address() as AddressInfo).port}`;
  return {
    url,
    gateway,
    store,
    key: async (body = { scopes: ['events:write'] }) => {
      const response = await createKey(url, await loginAdmin(url), { name: 'test', ...body });
      if (response.status !== 201) throw new Error(`create failed: ${response.status} ${response.text}`);
      return { key: response.body.key as string, id: response.body.id as number };
    },
    close: async () => {
      await gateway.app.close();
      await gateway.usage.close();
      await store.close();
    },
  };
}
