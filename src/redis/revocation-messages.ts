import type { RedisSigner } from './signer.ts';

/**
 * The revocation bus's three messages, each signed for its own purpose so that none can pass
 * for another: a change (on the shared channel), its acknowledgement (on the origin's own
 * channel) and a proof of the subscription (on the sender's own channel).
 */

const CHANGE = 'revocation';
const ACK = 'revocation-ack';
const PROOF = 'revocation-proof';

/** `keyId` changed; `origin` waits for acknowledgements of `nonce` on its own channel. */
export interface Change {
  keyId: number;
  nonce: string;
  origin: string;
}

/** `replica` has dropped the key of the change `nonce`. */
export interface Ack {
  nonce: string;
  replica: string;
}

export function signChange(signer: RedisSigner, change: Change): string {
  return signer.sign(CHANGE, JSON.stringify({ keyId: change.keyId, nonce: change.nonce, origin: change.origin }));
}

export function openChange(signer: RedisSigner, message: string): Change | undefined {
  const value = parseObject(signer.open(CHANGE, message));
  if (value === undefined) return undefined;
  const { keyId, nonce, origin } = value;
  if (!Number.isSafeInteger(keyId) || (keyId as number) <= 0) return undefined;
  if (!isToken(nonce) || !isToken(origin)) return undefined;
  return { keyId: keyId as number, nonce, origin };
}

export function signAck(signer: RedisSigner, ack: Ack): string {
  return signer.sign(ACK, JSON.stringify({ nonce: ack.nonce, replica: ack.replica }));
}

export function openAck(signer: RedisSigner, message: string): Ack | undefined {
  const value = parseObject(signer.open(ACK, message));
  if (value === undefined) return undefined;
  const { nonce, replica } = value;
  if (!isToken(nonce) || !isToken(replica)) return undefined;
  return { nonce, replica };
}

export function signProof(signer: RedisSigner, nonce: string): string {
  return signer.sign(PROOF, JSON.stringify({ nonce }));
}

export function openProof(signer: RedisSigner, message: string): { nonce: string } | undefined {
  const value = parseObject(signer.open(PROOF, message));
  if (value === undefined || !isToken(value.nonce)) return undefined;
  return { nonce: value.nonce };
}

/** Nonces and replica ids: short, printable, safe in a channel name. */
export function isToken(value: unknown): value is string {
  return typeof value === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(value);
}

function parseObject(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
