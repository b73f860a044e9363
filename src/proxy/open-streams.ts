import { GatewayError } from '../errors/gateway-error.ts';
import type { Principal } from '../policy/principal.ts';

export interface OpenStreamsOptions {
  /** `MAX_STREAMS_PER_KEY`: streams one credential may hold open at once. */
  maxPerCredential: number;
  /** The clock that `expires_at` and a session's `exp` are read against. */
  now: () => Date;
}

/** Ends one open stream: destroys the client's connection, which aborts the upstream's side too. */
export type CloseStream = () => void;

/** Takes an open stream off the books once it has ended, however it ended. Idempotent. */
export type ReleaseStream = () => void;

interface OpenStream {
  /** `api_key:<id>` or `admin:<id>`. */
  readonly credential: string;
  /** Counts towards the credential's cap (`open`'s `counted`). */
  readonly counted: boolean;
  readonly close: CloseStream;
  /** An admin token's session: the stream ends with it. */
  readonly session: string | undefined;
  /** Fires at the credential's expiry; cleared when the stream ends. */
  expiry: NodeJS.Timeout | undefined;
}

/** Evictions remembered to close streams whose credential was evicted while they were being authorized. */
const RECENT_EVICTIONS = 256;
/** setTimeout's largest delay (about 24.8 days); a later expiry is re-armed when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The long-lived answers (event streams, WebSocket tunnels) open on this replica, by the
 * credential that opened them: at most `maxPerCredential` each (`429 too_many_streams`
 * beyond), and cut when the credential ends — an evicted API key (revoked, disabled,
 * rotated, changed: `closeKey`, called by the same eviction that drops the key's cached
 * state, before this replica acknowledges the revocation barrier), and at the key's
 * `expires_at` or the admin session's `exp`.
 *
 * Bounded: a credential has at most `maxPerCredential` entries and appears only while it has a
 * stream open, and every stream holds a client connection (at most `MAX_CONNECTIONS`).
 */
export class OpenStreams {
  readonly #max: number;
  readonly #now: () => Date;
  readonly #byCredential = new Map<string, Set<OpenStream>>();
  /** Streams counted towards each credential's cap, for the credentials that hold any. */
  readonly #counted = new Map<string, number>();
  /** The last evictions (key id, when), newest last: see `open`'s `authorizedSince`. */
  readonly #recent: Array<{ keyId: number; at: number }> = [];
  #open = 0;

  constructor(options: OpenStreamsOptions) {
    if (!Number.isSafeInteger(options.maxPerCredential) || options.maxPerCredential < 1) {
      throw new RangeError('OpenStreams: maxPerCredential must be a positive integer');
    }
    this.#max = options.maxPerCredential;
    this.#now = options.now;
  }

  /** Streams open now, on this replica. */
  get size(): number {
    return this.#open;
  }

  /**
   * Books a stream for `principal` before it is sent upstream. Throws `too_many_streams` when
   * the credential already holds the maximum. `authorizedSince` is `performance.now()` from
   * before the credential was checked, when that check (or what followed it) was asynchronous:
   * a key evicted since then may have been allowed on its old state, so the stream is closed
   * at once, as it would have been had it opened a moment earlier; so is one whose credential
   * expired meanwhile. Undefined is returned then, and the caller sends nothing upstream.
   * An anonymous request (a public route) is not booked. `counted: false` books a stream only
   * to cut it when its credential ends, outside the cap: the event-stream answer to an MCP
   * `POST`, which lasts as long as the requests it answers, and which a client may send many
   * of at once.
   */
  open(principal: Principal | null, close: CloseStream, authorizedSince?: number, counted = true): ReleaseStream | undefined {
    if (principal === null) return noRelease;
    if (principal.kind === 'api_key' && authorizedSince !== undefined && this.#evictedSince(principal.keyId, authorizedSince)) {
      close();
      return undefined;
    }
    const expiresAt = expiryOf(principal);
    if (expiresAt !== undefined && expiresAt <= this.#now().getTime()) {
      // Expired while it was being authorized.
      close();
      return undefined;
    }
    const credential = credentialOf(principal);
    const held = this.#counted.get(credential) ?? 0;
    if (counted && held >= this.#max) {
      throw new GatewayError('too_many_streams', `This credential already holds ${this.#max} open streams; close one first`);
    }
    let streams = this.#byCredential.get(credential);
    if (streams === undefined) {
      streams = new Set();
      this.#byCredential.set(credential, streams);
    }
    const stream: OpenStream = { credential, counted, close, session: principal.kind === 'admin' ? principal.sessionId : undefined, expiry: undefined };
    streams.add(stream);
    if (counted) this.#counted.set(credential, held + 1);
    this.#open++;
    if (expiresAt !== undefined) this.#closeAt(stream, expiresAt);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#forget(stream);
    };
  }

  /** Closes every stream of API key `keyId`: the key's state changed, so each is re-authorized when its client reconnects. */
  closeKey(keyId: number): void {
    this.#recent.push({ keyId, at: performance.now() });
    if (this.#recent.length > RECENT_EVICTIONS) this.#recent.shift();
    const streams = this.#byCredential.get(`api_key:${keyId}`);
    if (streams === undefined) return;
    for (const stream of [...streams]) this.#end(stream);
  }

  /** Closes every stream opened with a token of admin session `sessionId`: the session ended (logout, deleted, password changed). */
  closeSession(sessionId: string): void {
    for (const [credential, streams] of [...this.#byCredential]) {
      if (!credential.startsWith('admin:')) continue;
      for (const stream of [...streams]) if (stream.session === sessionId) this.#end(stream);
    }
  }

  /**
   * Closes every API key's stream: this replica can no longer prove it hears of evictions (its
   * revocation subscription lapsed), so a key revoked meanwhile would keep its streams. Each
   * client reconnects and is checked against the store. Admin sessions' tunnels stay: a degraded
   * replica checks each admin request against the store, and an ended session closes its own.
   */
  closeApiKeyStreams(): void {
    for (const [credential, streams] of [...this.#byCredential]) {
      if (!credential.startsWith('api_key:')) continue;
      for (const stream of [...streams]) this.#end(stream);
    }
  }

  #end(stream: OpenStream): void {
    this.#forget(stream);
    stream.close();
  }

  #forget(stream: OpenStream): void {
    const { credential } = stream;
    const streams = this.#byCredential.get(credential);
    if (streams === undefined || !streams.delete(stream)) return;
    this.#open--;
    if (stream.counted) {
      const held = this.#counted.get(credential)! - 1;
      if (held === 0) this.#counted.delete(credential);
      else this.#counted.set(credential, held);
    }
    clearTimeout(stream.expiry);
    stream.expiry = undefined;
    if (streams.size === 0) this.#byCredential.delete(credential);
  }

  /** Whether `keyId` was evicted at or after `since`; unknown (older than what is remembered) counts as evicted. */
  #evictedSince(keyId: number, since: number): boolean {
    const recent = this.#recent;
    if (recent.length === RECENT_EVICTIONS && recent[0]!.at >= since) return true;
    for (let i = recent.length - 1; i >= 0 && recent[i]!.at >= since; i--) {
      if (recent[i]!.keyId === keyId) return true;
    }
    return false;
  }

  /** Ends `stream` when its credential expires (one timer per stream, cleared when it ends). */
  #closeAt(stream: OpenStream, expiresAt: number): void {
    const arm = () => {
      const delay = expiresAt - this.#now().getTime();
      if (delay <= 0) {
        this.#end(stream);
        return;
      }
      stream.expiry = setTimeout(arm, Math.min(delay, MAX_TIMER_MS));
      // A stream's timer never keeps the process alive on its own: the stream's socket does.
      stream.expiry.unref();
    };
    arm();
  }
}

function noRelease(): void {}

function credentialOf(principal: Principal): string {
  return principal.kind === 'api_key' ? `api_key:${principal.keyId}` : `admin:${principal.adminId}`;
}

/** When the credential stops being valid, in epoch milliseconds: an API key's `expires_at`, an admin session token's `exp`. */
function expiryOf(principal: Principal): number | undefined {
  return principal.expiresAt?.getTime();
}
