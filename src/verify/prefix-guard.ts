import { LRUCache } from 'lru-cache';
import { GatewayError } from '../errors/gateway-error.ts';
import type { FailureLimiter } from '../limits/failure-limiter.ts';
import type { ProbeGate } from '../limits/probe-gate.ts';

/**
 * Uncached keys of one prefix verified at once. Only one key has a given prefix and its own
 * concurrent first uses share one verify, so a second distinct key in flight is a guess:
 * refusing it keeps the argon2 spent per prefix within the failure limit even in a burst.
 */
const KEY_PREFIX_VERIFIES_IN_FLIGHT = 1;

export interface PrefixGuardSettings {
  limiter: FailureLimiter;
  probe: ProbeGate;
  now: () => number;
  rejectedTtlMs: number;
  rejectedCacheSize: number;
  /** Counts each refusal the guard makes, for the verifier's stats. */
  counts: { throttled: number; probes: number; rejectedHits: number };
}

/**
 * What stands between a guessed key and argon2id (docs/security.md, "Guesses behind a real
 * key's prefix"): the failure count per prefix and its throttle (one verify a second let
 * through, in turns by client address), one distinct key of a prefix verified at a time, and a
 * short memory of exact wrong keys. Every refusal here is thrown as `rate_limited` or answered
 * by the verifier as `invalid_credential`.
 */
export class PrefixGuard {
  readonly #settings: PrefixGuardSettings;
  /** Exact wrong keys → clock reading until which they are refused from memory. */
  readonly #rejected: LRUCache<string, number>;
  readonly #verifying = new Map<string, number>();

  constructor(settings: PrefixGuardSettings) {
    this.#settings = settings;
    this.#rejected = new LRUCache({ max: settings.rejectedCacheSize });
  }

  /**
   * A throttled prefix still lets one key through per probe interval, unless its key is proven
   * here (`proven`, asked once the limiter has answered: the real key may prove its prefix
   * meanwhile): then every other key of the prefix is wrong and the real one is served from
   * memory, so a guess must not spend the interval's one verify that another replica's real key may need.
   * True when the prefix is throttled and the gate let this key through.
   */
  async passThrottle(prefix: string, claimant: string, proven: () => boolean): Promise<boolean> {
    const blockedFor = await this.#blockedFor(prefix);
    if (blockedFor === 0) return false;
    if (proven()) throw this.#throttled('Too many failed attempts for this key prefix', blockedFor);
    if (!(await this.#settings.probe.tryPass(prefix, claimant))) throw this.#throttled('Too many failed attempts for this key prefix', 1);
    this.#settings.counts.probes++;
    return true;
  }

  /** From this check to `enter` without an await: concurrent guesses cannot all pass. */
  refuseIfInFlight(prefix: string): void {
    if ((this.#verifying.get(prefix) ?? 0) >= KEY_PREFIX_VERIFIES_IN_FLIGHT) {
      this.#settings.counts.throttled++;
      throw new GatewayError('rate_limited', 'Another key with this prefix is being verified', { retryAfter: 1 });
    }
  }

  enter(prefix: string): void {
    this.#verifying.set(prefix, (this.#verifying.get(prefix) ?? 0) + 1);
  }

  leave(prefix: string): void {
    const left = (this.#verifying.get(prefix) ?? 1) - 1;
    if (left === 0) this.#verifying.delete(prefix);
    else this.#verifying.set(prefix, left);
  }

  /** A failed guess counts against its prefix; a limiter that cannot record it does not fail the refusal. */
  async recordFailure(prefix: string): Promise<void> {
    await this.#settings.limiter.recordFailure(prefix).catch(() => {});
  }

  recentlyRejected(rawKey: string): boolean {
    const until = this.#rejected.get(rawKey);
    if (until === undefined) return false;
    if (until > this.#settings.now()) {
      this.#settings.counts.rejectedHits++;
      return true;
    }
    this.#rejected.delete(rawKey);
    return false;
  }

  /** `rawKey` is a flat copy (see key-verifier.ts `flatCopy`): the entry holds only the key's own bytes. */
  reject(rawKey: string): void {
    this.#rejected.set(rawKey, this.#settings.now() + this.#settings.rejectedTtlMs);
  }

  async #blockedFor(prefix: string): Promise<number> {
    try {
      return await this.#settings.limiter.blockedFor(prefix);
    } catch (cause) {
      // A limiter that cannot answer must not turn into an unthrottled argon2 oracle.
      throw new GatewayError('store_unavailable', 'The failure limiter cannot be reached', { cause });
    }
  }

  #throttled(message: string, retryAfter: number): GatewayError {
    this.#settings.counts.throttled++;
    return new GatewayError('rate_limited', message, { retryAfter });
  }
}
