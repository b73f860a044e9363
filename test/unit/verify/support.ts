import { randomBytes } from 'node:crypto';
import { Argon2Hasher } from '../../../src/crypto/argon2.ts';
import { appendChecksum, generateKey, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG, keyPrefixOf } from '../../../src/credentials/key-format.ts';
import { GatewayError, type ErrorCode } from '../../../src/errors/gateway-error.ts';
import type { ApiKeyRow, Store } from '../../../src/store/store.ts';

/** Tiny argon2id parameters: real hashing, unit-test speed. */
export function tinyHasher(concurrency = 2): Argon2Hasher {
  return new Argon2Hasher({ memoryKiB: 1024, timeCost: 1, parallelism: 1, concurrency });
}

export const T0 = Date.parse('2026-06-01T00:00:00Z');

/** A frozen clock that tests move by hand. */
export class FrozenClock {
  ms = T0;
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

/**
 * The two reads the verifier makes, over an in-memory table, counting calls; `down` makes
 * every read reject as an unreachable database would.
 */
export class KeyTable implements Pick<Store, 'findApiKeyByPrefix' | 'findApiKeyById'> {
  readonly rows = new Map<number, ApiKeyRow>();
  byPrefixCalls = 0;
  byIdCalls = 0;
  down = false;
  #nextId = 1;

  get calls(): number {
    return this.byPrefixCalls + this.byIdCalls;
  }

  /** Generates a real key, stores its argon2id hash and returns the raw key with its row. */
  async add(hasher: Argon2Hasher, fields: Partial<Pick<ApiKeyRow, 'agentId' | 'scopes' | 'expiresAt' | 'revokedAt'>> = {}) {
    const key = generateKey();
    const row: ApiKeyRow = {
      id: this.#nextId++,
      name: 'test',
      agentId: null,
      keyPrefix: keyPrefixOf(key),
      keyHash: await hasher.hash(key),
      scopes: ['events:write'],
      createdAt: new Date(T0),
      lastUsedAt: null,
      expiresAt: null,
      revokedAt: null,
      enabled: true,
      updatedAt: new Date(T0),
      rateLimit: null,
      rotatedFrom: null,
      rotatedTo: null,
      ...fields,
    };
    this.rows.set(row.id, row);
    return { key, row };
  }

  /** Holds every answer until `release()`: the row is read when the call is made, delivered late. */
  hold(): void {
    this.#held = new Promise((resolve) => (this.release = resolve));
  }
  release: () => void = () => {};
  #held: Promise<void> = Promise.resolve();

  async findApiKeyByPrefix(prefix: string): Promise<ApiKeyRow | null> {
    this.byPrefixCalls++;
    const down = this.down;
    let found: ApiKeyRow | null = null;
    for (const row of this.rows.values()) if (row.keyPrefix === prefix) found = { ...row };
    await this.#held;
    if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    return found;
  }

  async findApiKeyById(id: number): Promise<ApiKeyRow | null> {
    this.byIdCalls++;
    const down = this.down;
    const row = this.rows.get(id);
    const found = row === undefined ? null : { ...row };
    await this.#held;
    if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
    return found;
  }
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A well-formed key (valid checksum) carrying `prefix` and a random, wrong secret. */
export function forgedKey(prefix: string): string {
  const fill = KEY_TAG.length + KEY_BODY_LENGTH - KEY_PREFIX_LENGTH;
  return appendChecksum(prefix + [...randomBytes(fill)].map((byte) => BASE62[byte % 62]).join(''));
}

/** The GatewayError code a call throws or rejects with (fails the test if it succeeds or throws something else). */
/**
 * How a verification ended: the code of its refusal, or `revoked_credential` for the principal
 * of a revoked key (the verifier proves who a key is; `decide()` refuses it as revoked).
 */
export async function codeOf(attempt: () => unknown): Promise<ErrorCode> {
  let verified: unknown;
  try {
    verified = await attempt();
  } catch (error) {
    if (error instanceof GatewayError) return error.code;
    throw error;
  }
  if ((verified as { revoked?: boolean } | undefined)?.revoked === true) return 'revoked_credential';
  throw new Error('expected a refusal or a revoked key, got success');
}
