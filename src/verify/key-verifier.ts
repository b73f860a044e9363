import { LRUCache } from 'lru-cache';
import type { Argon2Hasher } from '../crypto/argon2.ts';
import { isWellFormedKey, keyPrefixOf } from '../credentials/key-format.ts';
import { GatewayError } from '../errors/gateway-error.ts';
import { PrefixGuard } from './prefix-guard.ts';
import { MemoryFailureLimiter, type FailureLimiter } from '../limits/failure-limiter.ts';
import { MemoryProbeGate, UNKNOWN_CLAIMANT, type ProbeGate } from '../limits/probe-gate.ts';
import type { ApiKeyPrincipal } from '../policy/principal.ts';
import type { ApiKeyRow, Store } from '../store/store.ts';
import { Flights } from './flights.ts';
import { IdentityDigester, type IdentityTier } from './identity-tier.ts';
import { keyStateOf, ScopeLists, type KeyState } from './key-state.ts';

/** Keys held by each in-process tier (`KEY_CACHE_SIZE`). */
export const DEFAULT_KEY_CACHE_SIZE = 100_000;
/** How long a key's state is trusted before it is re-read (`KEY_CACHE_TTL`); revocation evicts at once regardless. */
export const DEFAULT_KEY_STATE_TTL_MS = 5 * 60_000;
/**
 * Failed verifies allowed per key prefix in one window before the prefix is blocked: a real
 * key's owner mistypes rarely (and a mistyped key fails its checksum first), while an attacker
 * guessing secrets behind a known prefix would otherwise buy one argon2id hash per request.
 */
export const KEY_PREFIX_FAILURE_LIMIT = 20;
export const KEY_PREFIX_FAILURE_WINDOW_MS = 60_000;
/**
 * Once a prefix is throttled, one uncached key of it is still verified per this interval:
 * guesses then buy one argon2id verify a second, and the real key, used for the first time on a
 * replica that has not cached it, gets in within a second or two instead of waiting out the window.
 */
export const KEY_PREFIX_PROBE_INTERVAL_MS = 1_000;
/** An exact wrong key is refused from memory this long, so repeating it costs nothing. */
export const REJECTED_KEY_TTL_MS = 5_000;
export const REJECTED_KEY_CACHE_SIZE = 10_000;
/** Lifetime of an entry in the shared identity tier; the fact never changes, this only bounds Redis memory. */
export const DEFAULT_SHARED_IDENTITY_TTL_MS = 24 * 60 * 60_000;

export interface KeyVerifierOptions {
  store: Pick<Store, 'findApiKeyByPrefix' | 'findApiKeyById'>;
  hasher: Pick<Argon2Hasher, 'verify'>;
  /** Failed verifies per key prefix; default: in memory, KEY_PREFIX_FAILURE_LIMIT per KEY_PREFIX_FAILURE_WINDOW_MS. */
  limiter?: FailureLimiter;
  /** Verifies let through a throttled prefix; default: in memory, one per KEY_PREFIX_PROBE_INTERVAL_MS. */
  probe?: ProbeGate;
  /** Entries per in-process tier; default DEFAULT_KEY_CACHE_SIZE. */
  cacheSize?: number;
  /** Milliseconds a key's state is served from memory; 0 re-reads it on every request. Default DEFAULT_KEY_STATE_TTL_MS. */
  stateTtlMs?: number;
  /** Milliseconds since the epoch; tests freeze it. Default Date.now. */
  now?: () => number;
  /** The shared identity tier across replicas; without it no HMAC is computed at all. */
  shared?: { tier: IdentityTier; pepper: string | Uint8Array; ttlMs?: number };
}

interface SharedIdentity {
  tier: IdentityTier;
  digester: IdentityDigester;
  ttlMs: number;
}

/** What a singleflight of an uncached key yields to every caller that shared it. */
interface ResolvedIdentity {
  keyId: number;
  /** From the row read by prefix; absent when the id came from the shared tier. */
  state: KeyState | undefined;
  /** The eviction count when that row was read. */
  evictionsAtRead: number;
}

/** Counters since start, for metrics. Every verification counts once per tier it consulted. */
export interface KeyVerifierStats {
  identityHits: number;
  identityMisses: number;
  sharedHits: number;
  sharedMisses: number;
  /** Shared-tier calls that failed (treated as misses). */
  sharedErrors: number;
  stateHits: number;
  /** State reads by key id from the store. */
  stateMisses: number;
  argon2Verifies: number;
  argon2Mismatches: number;
  /** Refused with `rate_limited` before any store or argon2 work. */
  throttled: number;
  /** Uncached keys of a throttled prefix let through to be verified (at most one per prefix per interval). */
  probes: number;
  /** Refused from the short memory of exact wrong keys. */
  rejectedHits: number;
  /** Refused with no store read and no hash: their prefix's key is cached, and they are not it. */
  provenPrefixRefusals: number;
}

/**
 * Turns a presented API key into its principal (docs/architecture.md, "Verification and caching"; docs/adr/0002-two-cache-tiers-and-proven-prefixes.md).
 *
 * Two in-process tiers: `identity` (raw key → key id, filled only by a successful argon2id
 * verify, never invalidated: that fact cannot change) and `state` (key id → revoked, scopes,
 * agent, expiry; re-read after `stateTtlMs`, dropped at once by `evict`). It proves who a key
 * is; whether the key may be used (revoked, expired) is `decide()`'s rule. A revoked key keeps
 * its identity entry: its principal says revoked, so it is refused with `revoked_credential`
 * without another hash, and an evicted key's owner never has to re-verify behind a prefix
 * that attackers have blocked.
 *
 * Hot path: `tryVerifyCached(key) ?? await verify(key)`.
 */
export class KeyVerifier {
  readonly #store: KeyVerifierOptions['store'];
  readonly #hasher: KeyVerifierOptions['hasher'];
  readonly #guard: PrefixGuard;
  readonly #now: () => number;
  readonly #stateTtlMs: number;
  readonly #shared: SharedIdentity | undefined;

  readonly #identity: LRUCache<string, number>;
  /**
   * Prefix → key id of every key in `identity`. A prefix belongs to one stored key forever
   * (unique, and keys are never deleted), so once a raw key is proven for a prefix, any other
   * key presented with that prefix is wrong: refused without a store read or an argon2id verify.
   * Guessing secrets behind the prefix of a key in use then costs the gateway nothing.
   */
  readonly #provenPrefixes = new Map<string, number>();
  readonly #state: LRUCache<number, KeyState>;
  readonly #scopes = new ScopeLists();
  readonly #identityFlights = new Flights<string, ResolvedIdentity>();
  readonly #stateFlights = new Flights<number, KeyState>();
  /**
   * Bumped by every eviction. A store read that started before an eviction may hold the state
   * from before a revocation: its answer is then not cached (jose's JWKS cache likewise ignores
   * late responses).
   */
  #evictions = 0;
  /** Set while evictions may be missed (revocation channel lost): state is then read on every request, never cached. */
  #degraded = false;
  readonly #counts: KeyVerifierStats = {
    identityHits: 0,
    identityMisses: 0,
    sharedHits: 0,
    sharedMisses: 0,
    sharedErrors: 0,
    stateHits: 0,
    stateMisses: 0,
    argon2Verifies: 0,
    argon2Mismatches: 0,
    throttled: 0,
    probes: 0,
    rejectedHits: 0,
    provenPrefixRefusals: 0,
  };

  constructor(options: KeyVerifierOptions) {
    const cacheSize = options.cacheSize ?? DEFAULT_KEY_CACHE_SIZE;
    const stateTtlMs = options.stateTtlMs ?? DEFAULT_KEY_STATE_TTL_MS;
    if (!Number.isSafeInteger(cacheSize) || cacheSize < 1) throw new RangeError('KeyVerifier: cacheSize must be a positive integer');
    if (!Number.isFinite(stateTtlMs) || stateTtlMs < 0) throw new RangeError('KeyVerifier: stateTtlMs must be a finite number ≥ 0');
    this.#store = options.store;
    this.#hasher = options.hasher;
    this.#now = options.now ?? Date.now;
    this.#stateTtlMs = stateTtlMs;
    this.#guard = new PrefixGuard({
      limiter: options.limiter ?? new MemoryFailureLimiter({ limit: KEY_PREFIX_FAILURE_LIMIT, windowMs: KEY_PREFIX_FAILURE_WINDOW_MS, now: this.#now }),
      probe: options.probe ?? new MemoryProbeGate({ intervalMs: KEY_PREFIX_PROBE_INTERVAL_MS, now: this.#now }),
      now: this.#now,
      rejectedTtlMs: REJECTED_KEY_TTL_MS,
      rejectedCacheSize: REJECTED_KEY_CACHE_SIZE,
      counts: this.#counts,
    });
    this.#identity = new LRUCache({
      max: cacheSize,
      dispose: (keyId, rawKey) => {
        const prefix = keyPrefixOf(rawKey);
        if (this.#provenPrefixes.get(prefix) === keyId) this.#provenPrefixes.delete(prefix);
      },
    });
    this.#state = new LRUCache({ max: cacheSize });
    if (options.shared !== undefined) {
      const { tier, pepper, ttlMs = DEFAULT_SHARED_IDENTITY_TTL_MS } = options.shared;
      this.#shared = { tier, digester: new IdentityDigester(pepper), ttlMs };
    }
  }

  /**
   * The cached path: two in-memory lookups and a clock read, no promise. Returns undefined
   * when anything is missing or stale (then call `verify`).
   */
  tryVerifyCached(rawKey: string): ApiKeyPrincipal | undefined {
    const keyId = this.#identity.get(rawKey);
    if (keyId === undefined) return undefined;
    const state = this.#state.get(keyId);
    const now = this.#now();
    if (state === undefined || state.freshUntil <= now) return undefined;
    this.#counts.identityHits++;
    this.#counts.stateHits++;
    return state.principal;
  }

  /**
   * The full path. Rejects with GatewayError: `invalid_credential` (malformed: no I/O and no
   * hash; unknown prefix; wrong secret),
   * `rate_limited` (prefix throttled, with `retryAfter`), `store_unavailable` (never an allow).
   * `claimant`: the client's address, whose turn a throttled prefix's one verify a second is taken by.
   */
  async verify(rawKey: string, claimant: string = UNKNOWN_CLAIMANT): Promise<ApiKeyPrincipal> {
    if (!isWellFormedKey(rawKey)) throw new GatewayError('invalid_credential', 'The API key is malformed');
    let keyId = this.#identity.get(rawKey);
    if (keyId === undefined) {
      this.#counts.identityMisses++;
      if (this.#guard.recentlyRejected(rawKey)) throw invalidKey();
      const resolved = await this.#identityFlights.run(rawKey, () => this.#resolveIdentity(rawKey, claimant));
      // The row that was hashed against is the state too, unless an eviction came after its read.
      // Degraded, a joined flight's row may predate a revocation nobody told us of: read again.
      if (resolved.state !== undefined && resolved.evictionsAtRead === this.#evictions && !this.#degraded) {
        return resolved.state.principal;
      }
      keyId = resolved.keyId;
    } else {
      this.#counts.identityHits++;
    }
    const state = await this.#stateOf(keyId);
    return state.principal;
  }

  /** Drops a key's state at once (revocation calls this); the next request re-reads it from the store. */
  evict(keyId: number): void {
    this.#evictions++;
    this.#state.delete(keyId);
    this.#stateFlights.forget(keyId);
  }

  /** Drops every key's state, e.g. when the revocation channel was lost and evictions may have been missed. */
  evictAll(): void {
    this.#evictions++;
    this.#state.clear();
    this.#stateFlights.clear();
  }

  /**
   * Degraded: evictions may be missed (the revocation channel is lost), so every request reads
   * its key's state from the store, unshared and uncached, as with `stateTtlMs` 0. Entering and
   * leaving both drop all state: on leaving, a read that began before the channel was back may
   * hold a state from before a revocation that was never announced to this replica.
   */
  setDegraded(degraded: boolean): void {
    this.#degraded = degraded;
    this.evictAll();
  }

  get degraded(): boolean {
    return this.#degraded;
  }

  /** Whether some key could be accepted now without the store: its state cached and fresh (for readiness). */
  holdsFreshState(): boolean {
    if (this.#degraded) return false;
    const now = this.#now();
    for (const state of this.#state.values()) if (state.freshUntil > now) return true;
    return false;
  }

  stats(): KeyVerifierStats {
    return { ...this.#counts };
  }


  #stateOf(keyId: number): KeyState | Promise<KeyState> {
    const cached = this.#state.get(keyId);
    if (cached !== undefined && cached.freshUntil > this.#now()) {
      this.#counts.stateHits++;
      return cached;
    }
    this.#counts.stateMisses++;
    // Degraded, a flight already under way may have read before a revocation: each request reads for itself.
    if (this.#degraded) return this.#loadState(keyId);
    return this.#stateFlights.run(keyId, () => this.#loadState(keyId));
  }

  async #loadState(keyId: number): Promise<KeyState> {
    const evictions = this.#evictions;
    const row = await this.#read(() => this.#store.findApiKeyById(keyId));
    // Keys are revoked, never deleted; a vanished row is refused like an unknown key.
    if (row === null) throw invalidKey();
    return this.#remember(row, evictions);
  }

  /**
   * Singleflight leader for an uncached key: shared tier, throttle, one store read, one argon2id
   * verify. The cheap tiers (the identity cache before this, the shared tier here) come first:
   * the throttle guards argon2 work only, so a key already verified anywhere is never throttled.
   */
  async #resolveIdentity(rawKey: string, claimant: string): Promise<ResolvedIdentity> {
    const shared = this.#shared;
    const digest = shared?.digester.digest(rawKey);
    if (shared !== undefined && digest !== undefined) {
      const keyId = await this.#sharedGet(shared.tier, digest);
      if (keyId !== undefined) {
        this.#prove(rawKey, keyId);
        return { keyId, state: undefined, evictionsAtRead: this.#evictions };
      }
    }

    const prefix = keyPrefixOf(rawKey);
    const gated = await this.#guard.passThrottle(prefix, claimant, () => this.#provenPrefixes.has(prefix));
    // From the in-flight check to the increment without an await: concurrent guesses cannot all pass.
    // A key the throttle's gate let through is not checked: the gate already allows one a second,
    // and refusing it for a verify still running from an earlier slot would spend its turn.
    if (!gated) this.#guard.refuseIfInFlight(prefix);
    if (this.#provenPrefixes.has(prefix)) {
      this.#counts.provenPrefixRefusals++;
      this.#guard.reject(flatCopy(rawKey));
      // Still a failed guess: the prefix is throttled as if the hash had been checked.
      await this.#guard.recordFailure(prefix);
      throw invalidKey();
    }
    this.#guard.enter(prefix);
    try {
      const evictions = this.#evictions;
      const row = await this.#read(() => this.#store.findApiKeyByPrefix(prefix));
      if (row === null) {
        this.#guard.reject(flatCopy(rawKey));
        throw invalidKey();
      }
      const matched = await this.#hasher.verify(row.keyHash, rawKey);
      // Counted once done, with its result: counted at its start, a scrape between the two read
      // verifies minus mismatches as a match, and the next one as a negative match, which a
      // Prometheus counter refuses (the whole scrape failed).
      this.#counts.argon2Verifies++;
      if (!matched) {
        this.#counts.argon2Mismatches++;
        this.#guard.reject(flatCopy(rawKey));
        // Recorded before this attempt leaves the in-flight count, so the next one sees it.
        await this.#guard.recordFailure(prefix);
        throw invalidKey();
      }
      this.#prove(rawKey, row.id);
      const state = this.#remember(row, evictions);
      if (shared !== undefined && digest !== undefined) void this.#sharedSet(shared, digest, row.id);
      return { keyId: row.id, state, evictionsAtRead: evictions };
    } finally {
      this.#guard.leave(prefix);
    }
  }

  /** Caches a key proven by an argon2id verify (here or, through the shared tier, on another replica). */
  #prove(rawKey: string, keyId: number): void {
    const key = flatCopy(rawKey);
    this.#identity.set(key, keyId);
    this.#provenPrefixes.set(keyPrefixOf(key), keyId);
  }

  /** Caches the row's state unless an eviction happened since its read began. */
  #remember(row: ApiKeyRow, evictionsAtRead: number): KeyState {
    const state = keyStateOf(row, this.#now() + this.#stateTtlMs, this.#scopes);
    if (evictionsAtRead === this.#evictions && !this.#degraded) this.#state.set(row.id, state);
    return state;
  }

  async #read<T>(query: () => Promise<T>): Promise<T> {
    try {
      return await query();
    } catch (cause) {
      throw new GatewayError('store_unavailable', 'The key store cannot be reached', { cause });
    }
  }

  async #sharedGet(tier: IdentityTier, digest: string): Promise<number | undefined> {
    try {
      const keyId = await tier.get(digest);
      if (keyId === undefined) this.#counts.sharedMisses++;
      else this.#counts.sharedHits++;
      return keyId;
    } catch {
      this.#counts.sharedErrors++;
      return undefined;
    }
  }

  /** Not awaited: the request has its answer; a lost write only costs another replica one verify. */
  async #sharedSet(shared: SharedIdentity, digest: string, keyId: number): Promise<void> {
    try {
      await shared.tier.set(digest, keyId, shared.ttlMs);
    } catch {
      this.#counts.sharedErrors++;
    }
  }
}

/** Unknown prefix and wrong secret read the same, so a refusal does not say which prefixes exist. */
function invalidKey(): GatewayError {
  return new GatewayError('invalid_credential', 'The API key is not valid');
}

/**
 * A key cut from the Authorization header is a V8 sliced string that keeps the whole header
 * alive; a cache entry should hold only the key's own bytes. Keys are ASCII, so latin1 is exact.
 */
function flatCopy(rawKey: string): string {
  return Buffer.from(rawKey, 'latin1').toString('latin1');
}
