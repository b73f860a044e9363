import type { Argon2Hasher } from '../crypto/argon2.ts';
import { generateKey, keyPrefixOf } from '../credentials/key-format.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { ApiKeyRow, Store } from '../store/store.ts';
import type { CreateKeyRequest } from './create-request.ts';

/** Told of every change to a key's state, so caches on every replica drop it before the change is acknowledged. */
export interface KeyStateListener {
  keyChanged(keyId: number): Promise<void>;
}

const PREFIX_ATTEMPTS = 5;

/** Create, list and revoke API keys. The raw key leaves this service once, in `createKey`'s result. */
export class KeyService {
  readonly #store: Store;
  readonly #hasher: Argon2Hasher;
  readonly #licenceLimit: number | null;
  readonly #listener: KeyStateListener;
  readonly #now: () => Date;

  constructor(deps: {
    store: Store;
    hasher: Argon2Hasher;
    licenceLimit: number | null;
    listener: KeyStateListener;
    now: () => Date;
  }) {
    this.#store = deps.store;
    this.#hasher = deps.hasher;
    this.#licenceLimit = deps.licenceLimit;
    this.#listener = deps.listener;
    this.#now = deps.now;
  }

  async createKey(request: CreateKeyRequest): Promise<{ row: ApiKeyRow; key: string }> {
    // 8 random base62 characters in the prefix: a clash is rare, and answered by drawing again.
    for (let attempt = 0; attempt < PREFIX_ATTEMPTS; attempt++) {
      const key = generateKey();
      const result = await this.#store.createApiKey(
        { ...request, keyPrefix: keyPrefixOf(key), keyHash: await this.#hasher.hash(key) },
        this.#licenceLimit,
        this.#now(),
      );
      if (result.ok) return { row: result.key, key };
      if (result.reason === 'license_limit') {
        throw new GatewayError(
          'license_limit',
          `The licence allows ${this.#licenceLimit} active API keys; revoke one or extend the licence`,
        );
      }
    }
    throw new Error('could not draw a unique key prefix');
  }

  listKeys(): Promise<ApiKeyRow[]> {
    return this.#store.listApiKeys();
  }

  /** Idempotent; resolves once every replica has dropped the key. Unknown id: 404. */
  async revokeKey(id: number): Promise<ApiKeyRow> {
    const row = await this.#store.revokeApiKey(id, this.#now());
    if (!row) throw new GatewayError('not_found', `No API key with id ${id}`);
    await this.#listener.keyChanged(id);
    return row;
  }
}
