import { describe, expect, it } from 'vitest';
import { EndedSessions } from '../../../src/admin/ended-sessions.ts';
import type { AdminPrincipal } from '../../../src/policy/principal.ts';

const START = Date.parse('2030-06-01T12:00:00.000Z');
const TTL_MS = 3_600_000;

function setup() {
  const clock = { now: START };
  const ended = new EndedSessions({ now: () => clock.now, tokenTtlMs: TTL_MS });
  return { clock, ended };
}

function principal(sessionId: string, expiresAt = new Date(START + TTL_MS)): AdminPrincipal {
  return Object.freeze({ kind: 'admin', adminId: 1, expiresAt, sessionId, revoked: false });
}

describe('EndedSessions', () => {
  it('is out of sync from unsync until a read of the store that began after it; a read begun before proves nothing', () => {
    const { ended } = setup();
    expect(ended.synced).toBe(true);
    const before = ended.generation;
    ended.unsync();
    ended.markSynced(before);
    expect(ended.synced).toBe(false);
    const after = ended.generation;
    ended.markSynced(after);
    expect(ended.synced).toBe(true);
  });

  it('tells onEnded of each session once, however it learns of it (the bus, the store, this replica)', () => {
    const told: string[] = [];
    const ended = new EndedSessions({ now: () => START, tokenTtlMs: TTL_MS, onEnded: (id) => void told.push(id) });
    ended.end('a');
    ended.load([{ id: 'a', expiresAt: new Date(START + 10) }, { id: 'b', expiresAt: new Date(START + 10) }]);
    ended.end('b', new Date(START + 20));
    expect(told).toEqual(['a', 'b']);
  });

  it('leaves a session nobody ended as it is: the same object, no copy', () => {
    const { ended } = setup();
    const session = principal('s-1');
    expect(ended.apply(session)).toBe(session);
    ended.end('s-2', new Date(START + 1_000));
    expect(ended.apply(session)).toBe(session);
  });

  it('an ended session comes back revoked, the rest of the principal unchanged', () => {
    const { ended } = setup();
    const session = principal('s-1');
    ended.end('s-1', session.expiresAt);
    const revoked = ended.apply(session);
    expect(revoked).toEqual({ ...session, revoked: true });
    expect(Object.isFrozen(revoked)).toBe(true);
    // The principal given is not changed: another replica's or the cache's copy stays as verified.
    expect(session.revoked).toBe(false);
  });

  it('makes the revoked copy once per principal: a repeated check allocates nothing', () => {
    const { ended } = setup();
    const session = principal('s-1');
    ended.end('s-1');
    const first = ended.apply(session);
    expect(ended.apply(session)).toBe(first);
    expect(ended.revoked(session)).toBe(first);
    // Another principal object of the same session gets a copy of its own.
    const other = principal('s-1');
    expect(ended.apply(other)).not.toBe(first);
    expect(ended.apply(other)).toEqual(first);
  });

  it('forgets an end once its token has expired (at the next end)', () => {
    const { clock, ended } = setup();
    ended.end('s-1', new Date(START + 1_000));
    ended.end('s-2', new Date(START + 5_000));
    expect(ended.size).toBe(2);
    clock.now = START + 1_000;
    ended.end('s-3', new Date(START + 9_000));
    expect(ended.size).toBe(2);
    expect(ended.apply(principal('s-1'))).toMatchObject({ revoked: false });
    expect(ended.apply(principal('s-2'))).toMatchObject({ revoked: true });
    clock.now = START + 9_000;
    ended.end('s-4', new Date(START + 10_000));
    expect(ended.size).toBe(1);
    expect(ended.apply(principal('s-4'))).toMatchObject({ revoked: true });
  });

  it('an end told by another replica (no expiry known) is kept for the longest a token lives: now + token ttl', () => {
    const { clock, ended } = setup();
    ended.end('remote');
    clock.now = START + TTL_MS - 1;
    ended.end('other', new Date(START + 2 * TTL_MS));
    expect(ended.apply(principal('remote'))).toMatchObject({ revoked: true });
    clock.now = START + TTL_MS;
    ended.end('other', new Date(START + 2 * TTL_MS));
    expect(ended.apply(principal('remote'))).toMatchObject({ revoked: false });
    expect(ended.size).toBe(1);
  });

  it('a second end of the same session keeps the later expiry, never shortens it', () => {
    const { clock, ended } = setup();
    ended.end('s-1', new Date(START + 10_000));
    ended.end('s-1', new Date(START + 1_000));
    clock.now = START + 5_000;
    ended.end('x', new Date(START + 20_000));
    expect(ended.apply(principal('s-1'))).toMatchObject({ revoked: true });
    clock.now = START + 10_000;
    ended.end('x', new Date(START + 20_000));
    expect(ended.apply(principal('s-1'))).toMatchObject({ revoked: false });
    // The bus echoes the origin's own end without an expiry: kept now + ttl, past the token's own.
    ended.end('s-2', new Date(START + 11_000));
    ended.end('s-2');
    clock.now = START + 11_000;
    ended.end('x', new Date(START + 20_000));
    expect(ended.apply(principal('s-2'))).toMatchObject({ revoked: true });
  });

  it('is bounded by the token lifetime: ends spread over many lifetimes keep at most one lifetime of them', () => {
    const { clock, ended } = setup();
    const perSecond = 5;
    let max = 0;
    for (let second = 0; second < (4 * TTL_MS) / 1_000; second += 60) {
      clock.now = START + second * 1_000;
      for (let i = 0; i < perSecond; i++) ended.end(`s-${second}-${i}`);
      max = Math.max(max, ended.size);
    }
    // One end batch a minute, each kept one TTL: about TTL/60 s batches at any time.
    expect(max).toBeLessThanOrEqual((TTL_MS / 60_000 + 1) * perSecond);
    expect(max).toBeGreaterThanOrEqual((TTL_MS / 60_000) * perSecond);
  });
});
