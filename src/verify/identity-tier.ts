import { createHmac, createSecretKey, type KeyObject } from 'node:crypto';

/**
 * A shared `identity` tier (Redis, across replicas): digest of a presented key → key id.
 * Keyed by HMAC-SHA256(server pepper, raw key), so the raw key never leaves process memory
 * (docs/adr/0002-two-cache-tiers-and-proven-prefixes.md). A cache: a failure is treated as a miss.
 */
export interface IdentityTier {
  get(digest: string): Promise<number | undefined>;
  set(digest: string, keyId: number, ttlMs: number): Promise<void>;
}

/** Computes the shared tier's keys; built once, so each digest costs one HMAC and no key import. */
export class IdentityDigester {
  readonly #pepper: KeyObject;

  constructor(pepper: string | Uint8Array) {
    if (pepper.length === 0) throw new RangeError('IdentityDigester: pepper must not be empty');
    this.#pepper = createSecretKey(typeof pepper === 'string' ? Buffer.from(pepper, 'utf8') : pepper);
  }

  digest(rawKey: string): string {
    return createHmac('sha256', this.#pepper).update(rawKey, 'utf8').digest('base64url');
  }
}
