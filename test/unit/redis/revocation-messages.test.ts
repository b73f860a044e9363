import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { describeSubject, openAck, openChange, openProof, signAck, signChange, signProof } from '../../../src/redis/revocation-messages.ts';
import { RedisSigner } from '../../../src/redis/signer.ts';

const signer = new RedisSigner(randomBytes(32));
const SESSION = '3f2b6c1e-9a4d-4e8f-b1c2-7d5e6f708192';

/** A change as a replica of any version might put it on the channel: any fields, signed with the deployment secret. */
const raw = (fields: Record<string, unknown>) => signer.sign('revocation', JSON.stringify(fields));

describe('revocation messages: a change\'s subject', () => {
  it('a key\'s change keeps the wire form earlier versions read: {keyId, nonce, origin}, nothing else', () => {
    const signed = signChange(signer, { subject: { keyId: 12 }, nonce: 'n-1', origin: 'replica-a' });
    expect(signer.open('revocation', signed)).toBe('{"keyId":12,"nonce":"n-1","origin":"replica-a"}');
    // What an 8.0 replica sent is read as before.
    expect(openChange(signer, raw({ keyId: 12, nonce: 'n-1', origin: 'replica-a' }))).toEqual({ subject: { keyId: 12 }, nonce: 'n-1', origin: 'replica-a' });
  });

  it('a session\'s end goes round: signed, opened, the same change', () => {
    const change = { subject: { sessionId: SESSION }, nonce: 'n-2', origin: 'replica-b' };
    const signed = signChange(signer, change);
    expect(signer.open('revocation', signed)).toBe(`{"sessionId":"${SESSION}","nonce":"n-2","origin":"replica-b"}`);
    expect(openChange(signer, signed)).toEqual(change);
  });

  it('describes each subject for logs and the unannounced map: one entry per subject', () => {
    expect(describeSubject({ keyId: 12 })).toBe('key 12');
    expect(describeSubject({ sessionId: SESSION })).toBe(`session ${SESSION}`);
    expect(describeSubject({ sessionId: '12' })).not.toBe(describeSubject({ keyId: 12 }));
  });

  it.each([
    { why: 'both a key and a session', fields: { keyId: 12, sessionId: SESSION } },
    { why: 'a session with a key of null', fields: { keyId: null, sessionId: SESSION } },
    { why: 'neither', fields: {} },
    { why: 'an empty session id', fields: { sessionId: '' } },
    { why: 'a session id with a dot', fields: { sessionId: 'a.b' } },
    { why: 'a session id with a slash', fields: { sessionId: 'a/b' } },
    { why: 'a session id with a space', fields: { sessionId: 'a b' } },
    { why: 'a session id of 65 characters', fields: { sessionId: 'a'.repeat(65) } },
    { why: 'a session id that is a number', fields: { sessionId: 12 } },
    { why: 'a session id that is an object', fields: { sessionId: { id: SESSION } } },
    { why: 'a session id of null', fields: { sessionId: null } },
    { why: 'a key id of 0', fields: { keyId: 0 } },
    { why: 'a key id that is a string', fields: { keyId: '12' } },
    { why: 'a fractional key id', fields: { keyId: 1.5 } },
  ])('refuses a change naming $why', ({ fields }) => {
    expect(openChange(signer, raw({ ...fields, nonce: 'n', origin: 'o' }))).toBeUndefined();
  });

  it('a session id of 64 characters of [A-Za-z0-9_-] is accepted', () => {
    const sessionId = `${'a'.repeat(60)}_-Z9`;
    expect(openChange(signer, raw({ sessionId, nonce: 'n', origin: 'o' }))).toEqual({ subject: { sessionId }, nonce: 'n', origin: 'o' });
  });

  it('a session end signed with another secret, or for another purpose, is refused', () => {
    const change = { subject: { sessionId: SESSION }, nonce: 'n', origin: 'o' };
    expect(openChange(signer, signChange(new RedisSigner(randomBytes(32)), change))).toBeUndefined();
    const asAck = signer.sign('revocation-ack', JSON.stringify({ sessionId: SESSION, nonce: 'n', origin: 'o' }));
    expect(openChange(signer, asAck)).toBeUndefined();
    // And a change is neither an acknowledgement nor a proof.
    const signed = signChange(signer, change);
    expect(openAck(signer, signed)).toBeUndefined();
    expect(openProof(signer, signed)).toBeUndefined();
  });

  it('acknowledgements and proofs are unchanged', () => {
    expect(openAck(signer, signAck(signer, { nonce: 'n', replica: 'r' }))).toEqual({ nonce: 'n', replica: 'r' });
    expect(openProof(signer, signProof(signer, 'n'))).toEqual({ nonce: 'n' });
  });
});
