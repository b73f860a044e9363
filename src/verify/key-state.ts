import { LRUCache } from 'lru-cache';
import type { ApiKeyPrincipal } from '../policy/principal.ts';
import type { ApiKeyRow } from '../store/store.ts';

/**
 * What the `state` tier keeps per key id: the cheap facts that can change, and when to
 * re-read them. Small on purpose (docs/performance.md, "Key cache size and memory": 100,000 cached keys within 200 MB).
 */
export interface KeyState {
  /** Frozen and handed out as is on every request: no allocation on the cached path. */
  readonly principal: ApiKeyPrincipal;
  /**
   * Clock reading from which the state is stale and re-read from the store. The expiry is
   * read from the principal's own `expiresAt`: a copy here in milliseconds would cost every
   * cached key 24 bytes (a field and its boxed number).
   */
  readonly freshUntil: number;
}

export function keyStateOf(row: ApiKeyRow, freshUntil: number, scopes: ScopeLists): KeyState {
  const principal: ApiKeyPrincipal = Object.freeze({
    kind: 'api_key' as const,
    keyId: row.id,
    agentId: row.agentId,
    scopes: scopes.intern(row.scopes),
    expiresAt: row.expiresAt,
    revoked: row.revokedAt !== null,
    disabled: !row.enabled,
    rateLimit: row.rateLimit === null ? null : Object.freeze({ requests: row.rateLimit.requests, perSeconds: row.rateLimit.perSeconds }),
  });
  return {
    principal,
    freshUntil,
  };
}

/** Distinct scope lists seen at once; far more than any deployment's real variety. */
const SCOPE_LISTS_MAX = 1024;

/**
 * Shares one frozen array between keys (and state re-reads) holding the same scopes: keys
 * mostly repeat a few grants, so 100,000 keys need a handful of arrays, and `effectiveScopes`
 * (policy/scopes.ts), memoised by array identity, computes each expansion once.
 */
export class ScopeLists {
  readonly #lists = new LRUCache<string, readonly string[]>({ max: SCOPE_LISTS_MAX });

  intern(scopes: readonly string[]): readonly string[] {
    // Scope names are known, printable names (create-request.ts): a newline cannot occur in one.
    const id = scopes.join('\n');
    let list = this.#lists.get(id);
    if (list === undefined) {
      list = Object.freeze([...scopes]);
      this.#lists.set(id, list);
    }
    return list;
  }
}
