import type { RedisSigner } from './signer.ts';

/**
 * The revocation bus's three messages, each signed for its own purpose so that none can pass
 * for another: a change (on the shared channel), its acknowledgement (on the origin's own
 * channel) and a proof of the subscription (on the sender's own channel).
 */

const CHANGE = 'revocation';
const ACK = 'revocation-ack';
const PROOF = 'revocation-proof';

/** What changed: a key's state, or an admin session that ended. */
export type Subject = { readonly keyId: number } | { readonly sessionId: string };

/** `subject` changed; `origin` waits for acknowledgements of `nonce` on its own channel. */
export interface Change {
  subject: Subject;
  nonce: string;
  origin: string;
}

/** A subject in a log line or a map key: `key 12`, `session 4f…`. */
export function describeSubject(subject: Subject): string {
  return 'keyId' in subject ? `key ${subject.keyId}` : `session ${subject.sessionId}`;
}

/** `replica` has dropped the key of the change `nonce`. */
export interface Ack {
  nonce: string;
  replica: string;
}

/** A key's change keeps the form replicas of earlier versions read (`keyId`); a session's is `sessionId`. */
export function signChange(signer: RedisSigner, change: Change): string {
  return signer.sign(CHANGE, JSON.stringify({ ...change.subject, nonce: change.nonce, origin: change.origin }));
}

export function openChange(signer: RedisSigner, message: string): Change | undefined {
  const value = parseObject(signer.open(CHANGE, message));
  if (value === undefined) return undefined;
  const { keyId, sessionId, nonce, origin } = value;
  if (!isToken(nonce) || !isToken(origin)) return undefined;
  if (keyId !== undefined && sessionId === undefined) {
    if (!Number.isSafeInteger(keyId) || (keyId as number) <= 0) return undefined;
    return { subject: { keyId: keyId as number }, nonce, origin };
  }
  if (sessionId !== undefined && keyId === undefined && isToken(sessionId)) return { subject: { sessionId }, nonce, origin };
  return undefined;
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
