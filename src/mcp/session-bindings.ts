/**
 * Which API key opened which MCP session (docs/mcp.md, "Sessions": an `Mcp-Session-Id`, or a legacy
 * `sessionId`, is bound to the key that opened it; another key presenting it is refused
 * with 403 session_mismatch). Implementations: in memory (one replica) and Redis
 * (`redis-session-bindings.ts`, shared by replicas when REDIS_URL is set).
 *
 * A binding lives as long as its session is used: every successful check extends it by
 * the time to live, and it is removed when the session ends (DELETE, the legacy stream
 * closing, the upstream answering 404 for it).
 */
export interface SessionBindings {
  /** Binds a session the upstream has just issued to `keyId`. False when it is already bound to another key. */
  bind(sessionId: string, keyId: number): Promise<boolean>;
  /** Whose session this is. A binding to `keyId` is extended by the time to live. */
  check(sessionId: string, keyId: number): Promise<BindingCheck>;
  unbind(sessionId: string): Promise<void>;
}

/** `unknown`: never bound, expired or ended; `other_key`: bound to another key. */
export type BindingCheck = 'bound' | 'unknown' | 'other_key';

/** An idle session's binding is forgotten after this long (the session then answers 404 and the client starts another). */
export const DEFAULT_SESSION_BINDING_TTL_MS = 24 * 60 * 60_000;
/** In memory, at most this many bindings; the least recently used goes first (its client then re-initializes). */
export const DEFAULT_MAX_SESSION_BINDINGS = 100_000;

export interface MemorySessionBindingsOptions {
  ttlMs?: number;
  maxEntries?: number;
  /** Milliseconds; tests freeze it. Default Date.now. */
  now?: () => number;
}

interface Entry {
  keyId: number;
  expiresAt: number;
}

/** Bindings in this process: enough for one replica. */
export class MemorySessionBindings implements SessionBindings {
  readonly #entries = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxEntries: number;
  readonly #now: () => number;

  constructor(options: MemorySessionBindingsOptions = {}) {
    this.#ttlMs = options.ttlMs ?? DEFAULT_SESSION_BINDING_TTL_MS;
    this.#maxEntries = options.maxEntries ?? DEFAULT_MAX_SESSION_BINDINGS;
    this.#now = options.now ?? Date.now;
  }

  async bind(sessionId: string, keyId: number): Promise<boolean> {
    return this.bindSync(sessionId, keyId);
  }

  async check(sessionId: string, keyId: number): Promise<BindingCheck> {
    return this.checkSync(sessionId, keyId);
  }

  async unbind(sessionId: string): Promise<void> {
    this.#entries.delete(sessionId);
  }

  /** Synchronous forms, for the Redis implementation's local mirror. */
  bindSync(sessionId: string, keyId: number): boolean {
    const entry = this.#live(sessionId);
    if (entry !== undefined && entry.keyId !== keyId) return false;
    this.#touch(sessionId, keyId);
    return true;
  }

  checkSync(sessionId: string, keyId: number): BindingCheck {
    const entry = this.#live(sessionId);
    if (entry === undefined) return 'unknown';
    if (entry.keyId !== keyId) return 'other_key';
    this.#touch(sessionId, keyId);
    return 'bound';
  }

  get size(): number {
    return this.#entries.size;
  }

  #live(sessionId: string): Entry | undefined {
    const entry = this.#entries.get(sessionId);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.#now()) {
      this.#entries.delete(sessionId);
      return undefined;
    }
    return entry;
  }

  /** (Re)inserts at the end of the Map's order, so the first entry is always the least recently used. */
  #touch(sessionId: string, keyId: number): void {
    this.#entries.delete(sessionId);
    this.#entries.set(sessionId, { keyId, expiresAt: this.#now() + this.#ttlMs });
    while (this.#entries.size > this.#maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
  }
}
