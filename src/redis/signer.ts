import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * Authenticates what Gatehouse writes to Redis and reads back or receives from another
 * replica. Redis is shared infrastructure; whoever can write to it must not be able to make
 * a presented key resolve to another key id, or forge a replica's acknowledgement of a
 * revocation. HMAC-SHA256 under a secret kept in the store, with a purpose in every MAC so a
 * value signed for one use is worthless in another.
 */
export class RedisSigner {
  readonly #secret: KeyObject;

  constructor(secret: string | Uint8Array) {
    if (secret.length === 0) throw new RangeError('RedisSigner: secret must not be empty');
    this.#secret = createSecretKey(typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret);
  }

  /** `text` with its MAC appended after the last `.`; `text` may contain dots. */
  sign(purpose: string, text: string): string {
    return `${text}.${this.#mac(purpose, text)}`;
  }

  /** The text of a value signed for `purpose`, or undefined for anything else (forged, truncated, other purpose). */
  open(purpose: string, signed: string): string | undefined {
    const dot = signed.lastIndexOf('.');
    if (dot < 0) return undefined;
    const text = signed.slice(0, dot);
    const presented = Buffer.from(signed.slice(dot + 1), 'utf8');
    const expected = Buffer.from(this.#mac(purpose, text), 'utf8');
    if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return undefined;
    return text;
  }

  #mac(purpose: string, text: string): string {
    return createHmac('sha256', this.#secret).update(purpose).update('\n').update(text).digest('base64url');
  }
}
