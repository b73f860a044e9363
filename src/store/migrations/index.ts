import { initial } from './001-initial.ts';
import { apiKeysFillfactor } from './002-api-keys-fillfactor.ts';
import { keyLifecycle } from './003-key-lifecycle.ts';
import { adminSessions } from './004-admin-sessions.ts';
import { storeVersion } from './005-store-version.ts';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Every migration, in order. Never edit one that has shipped: add the next version. */
export const migrations: readonly Migration[] = [initial, apiKeysFillfactor, keyLifecycle, adminSessions, storeVersion];
