import type { ActorKind, AuditAction } from '../audit/audit-trail.ts';
import type { Argon2Hasher } from '../crypto/argon2.ts';
import { generateKey, keyPrefixOf } from '../credentials/key-format.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import type { ApiKeyRow, AuditOf, Store } from '../store/store.ts';
import type { CreateKeyRequest } from './create-request.ts';

/** Told of every change to a key's state, so caches on every replica drop it before the change is acknowledged. */
export interface KeyStateListener {
  keyChanged(keyId: number): Promise<void>;
}

/** Who changes a key, for its audit event: an admin over HTTP (from `address`) or an operator's `gatehouse` command. */
export interface Actor {
  kind: ActorKind;
  /** The admin id, or the operating-system user for `cli`. */
  id: string;
  address: string | null;
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

  /** The key and its `key_created` event are stored together before this resolves (issue 22, item 4). */
  async createKey(request: CreateKeyRequest, actor: Actor): Promise<{ row: ApiKeyRow; key: string }> {
    // 8 random base62 characters in the prefix: a clash is rare, and answered by drawing again.
    for (let attempt = 0; attempt < PREFIX_ATTEMPTS; attempt++) {
      const key = generateKey();
      const now = this.#now();
      const result = await this.#store.createApiKey(
        { ...request, keyPrefix: keyPrefixOf(key), keyHash: await this.#hasher.hash(key) },
        this.#licenceLimit,
        now,
        eventOf('key_created', actor, now),
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

  /**
   * Idempotent; resolves once every replica has dropped the key. Unknown id: 404. Every call
   * that finds the key stores a `key_revoked` event with the revocation, before the replicas are told.
   */
  async revokeKey(id: number, actor: Actor): Promise<ApiKeyRow> {
    const now = this.#now();
    const row = await this.#store.revokeApiKey(id, now, eventOf('key_revoked', actor, now));
    if (!row) throw new GatewayError('not_found', `No API key with id ${id}`);
    await this.#listener.keyChanged(id);
    return row;
  }
}

function eventOf(action: AuditAction, actor: Actor, at: Date): AuditOf<ApiKeyRow> {
  return (row) => ({ action, actorKind: actor.kind, actorId: actor.id, subjectId: String(row.id), clientAddress: actor.address, detail: {}, at });
}
