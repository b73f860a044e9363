import type { ActorKind, AuditAction } from '../audit/audit-trail.ts';
import type { Argon2Hasher } from '../crypto/argon2.ts';
import { generateKey, keyPrefixOf } from '../credentials/key-format.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { changedFields } from '../store/key-lifecycle.ts';
import type { ApiKeyPatch, ApiKeyRow, AuditOf, NewAuditEvent, RateLimit, Store } from '../store/store.ts';
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

/** What a rotation gives: the new key (raw, this once), the old key's record and, when Redis could not confirm the change on every replica, why. */
export interface RotatedKey {
  row: ApiKeyRow;
  key: string;
  old: ApiKeyRow;
  unconfirmed?: GatewayError;
}

/** Rotation's grace period when none is asked for: a day (docs/api-keys.md, "Key lifecycle"). */
export const DEFAULT_GRACE_SECONDS = 86_400;

/** Why a change is refused, as the API answers it. */
const REFUSALS = {
  not_found: (id: number) => new GatewayError('not_found', `No API key with id ${id}`),
  revoked: (id: number) => new GatewayError('key_revoked', `The API key ${id} is revoked: it cannot be changed or rotated`),
  expired: (id: number) => new GatewayError('key_expired', `The API key ${id} has expired: create a new key instead`),
  rotated: (id: number) => new GatewayError('key_rotated', `The API key ${id} has been rotated: change or rotate its successor (its expiry can only be brought forward)`),
} as const;

/**
 * Create, read, change, rotate and revoke API keys. The raw key leaves this service once, in
 * `createKey`'s or `rotateKey`'s result. Every change is stored with its audit event, then in
 * force on every replica before the method resolves (the listener's barrier).
 */
export class KeyService {
  readonly #store: Store;
  readonly #hasher: Argon2Hasher;
  readonly #licenceLimit: number | null;
  readonly #listener: KeyStateListener;
  readonly #now: () => Date;
  readonly #defaultRateLimit: RateLimit | null;

  constructor(deps: {
    store: Store;
    hasher: Argon2Hasher;
    licenceLimit: number | null;
    listener: KeyStateListener;
    now: () => Date;
    /** What a new key gets when its request names no rate limit (`DEFAULT_KEY_RATE_LIMIT`). Default none. */
    defaultRateLimit?: RateLimit | null;
  }) {
    this.#defaultRateLimit = deps.defaultRateLimit ?? null;
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
      const rateLimit = request.rateLimit === undefined ? this.#defaultRateLimit : request.rateLimit;
      const result = await this.#store.createApiKey(
        { ...request, rateLimit, keyPrefix: keyPrefixOf(key), keyHash: await this.#hasher.hash(key) },
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

  async getKey(id: number): Promise<ApiKeyRow> {
    const row = await this.#store.findApiKeyById(id);
    if (!row) throw REFUSALS.not_found(id);
    return row;
  }

  /**
   * Applies `patch`; a change that changed nothing is neither stored nor audited, but it is
   * announced all the same: it may be the retry of a change stored but not confirmed (503, Redis
   * out of this or another replica's reach), and its answer confirms the change on every replica.
   */
  async updateKey(id: number, patch: ApiKeyPatch, actor: Actor): Promise<ApiKeyRow> {
    const now = this.#now();
    const result = await this.#store.updateApiKey(id, patch, { now, limit: this.#licenceLimit, audit: (before, after) => updateEvents(before, after, actor, now) });
    if (!result.ok) {
      if (result.reason === 'license_limit') {
        throw new GatewayError('license_limit', `The licence allows ${this.#licenceLimit} active API keys: enabling this one would exceed it`);
      }
      throw REFUSALS[result.reason](id);
    }
    await this.#listener.keyChanged(id);
    return result.key;
  }

  /**
   * A new key in place of `id`, which keeps working for `graceSeconds` (0: revoked before this
   * resolves). Both keys' states, and any predecessor's the rotation revoked, are in force on
   * every replica before it resolves. The rotation is stored before the replicas are told: when
   * telling them fails, the new key is returned all the same with the failure (`unconfirmed`),
   * since it exists and the old key cannot be rotated again; every key is still announced.
   */
  async rotateKey(id: number, graceSeconds: number, actor: Actor): Promise<RotatedKey> {
    for (let attempt = 0; attempt < PREFIX_ATTEMPTS; attempt++) {
      const key = generateKey();
      const next = { keyPrefix: keyPrefixOf(key), keyHash: await this.#hasher.hash(key) };
      const now = this.#now();
      const result = await this.#store.rotateApiKey(id, next, {
        now,
        graceMs: graceSeconds * 1000,
        // `revoked`: the keys the rotation ended (the old one without grace, a predecessor still in its grace period).
        audit: (old, created, revoked) => ({ ...eventOf('key_rotated', actor, now)(old), detail: { from: old.id, to: created.id, grace_seconds: graceSeconds, revoked } }),
      });
      if (result.ok) {
        let unconfirmed: GatewayError | undefined;
        for (const changed of new Set([id, ...result.revoked])) {
          await this.#listener.keyChanged(changed).catch((error: unknown) => {
            if (!(error instanceof GatewayError)) throw error;
            unconfirmed ??= error;
          });
        }
        return { row: result.key, key, old: result.old, ...(unconfirmed === undefined ? {} : { unconfirmed }) };
      }
      if (result.reason !== 'prefix_taken') throw REFUSALS[result.reason](id);
    }
    throw new Error('could not draw a unique key prefix');
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

/** `key_enabled` or `key_disabled` when that changed, and `key_updated` naming the other fields that did. */
function updateEvents(before: ApiKeyRow, after: ApiKeyRow, actor: Actor, at: Date): NewAuditEvent[] {
  const fields = changedFields(before, after);
  const events: NewAuditEvent[] = [];
  if (fields.includes('enabled')) events.push(eventOf(after.enabled ? 'key_enabled' : 'key_disabled', actor, at)(after));
  const others = fields.filter((field) => field !== 'enabled');
  if (others.length > 0) events.push({ ...eventOf('key_updated', actor, at)(after), detail: { fields: others } });
  return events;
}

function eventOf(action: AuditAction, actor: Actor, at: Date): AuditOf<ApiKeyRow> {
  return (row) => ({ action, actorKind: actor.kind, actorId: actor.id, subjectId: String(row.id), clientAddress: actor.address, detail: {}, at });
}
