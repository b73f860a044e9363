import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * API key format, after GitHub's tokens: a recognisable prefix, a random body and a
 * CRC32 checksum, so a mistyped or truncated key is refused before any I/O or hash work.
 *
 *   ghk_ + 40 base62 characters (≈238 bits from the CSPRNG) + 6 base62 characters of CRC32
 *
 * `key_prefix` is the first 12 characters: `ghk_` and 8 random characters.
 */
export const KEY_TAG = 'ghk_';
export const KEY_BODY_LENGTH = 40;
export const KEY_CHECKSUM_LENGTH = 6;
export const KEY_LENGTH = KEY_TAG.length + KEY_BODY_LENGTH + KEY_CHECKSUM_LENGTH;
export const KEY_PREFIX_LENGTH = 12;

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_SHAPE = new RegExp(`^${KEY_TAG}[0-9A-Za-z]{${KEY_BODY_LENGTH + KEY_CHECKSUM_LENGTH}}$`);

export function generateKey(): string {
  return appendChecksum(KEY_TAG + randomBase62(KEY_BODY_LENGTH));
}

/** Completes a tag-and-body payload with its checksum (also how tests forge well-formed wrong keys). */
export function appendChecksum(payload: string): string {
  return payload + checksumOf(payload);
}

/** True when the text has the key's shape and its checksum matches. Pure; no I/O. */
export function isWellFormedKey(text: string): boolean {
  if (text.length !== KEY_LENGTH || !KEY_SHAPE.test(text)) return false;
  const payloadEnd = KEY_LENGTH - KEY_CHECKSUM_LENGTH;
  return checksumOf(text.slice(0, payloadEnd)) === text.slice(payloadEnd);
}

/** Cheap test used to classify a bearer token before verifying it. */
export function looksLikeKey(text: string): boolean {
  return text.startsWith(KEY_TAG);
}

export function keyPrefixOf(key: string): string {
  return key.slice(0, KEY_PREFIX_LENGTH);
}

function checksumOf(payload: string): string {
  let value = crc32(payload);
  let out = '';
  for (let i = 0; i < KEY_CHECKSUM_LENGTH; i++) {
    out = ALPHABET[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** Uniform base62 by rejection sampling: bytes ≥ 248 are dropped so no character is favoured. */
function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}
