import { afterEach, describe, expect, it, vi } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import type { AdminPrincipal, ApiKeyPrincipal } from '../../../src/policy/principal.ts';
import { OpenStreams } from '../../../src/proxy/open-streams.ts';

const NOW = Date.parse('2026-01-01T00:00:00Z');

function apiKey(keyId: number, expiresAt: Date | null = null): ApiKeyPrincipal {
  return { kind: 'api_key', keyId, agentId: null, scopes: ['mcp:agents'], expiresAt, revoked: false, disabled: false, rateLimit: null };
}

/** An admin principal as the verifier hands it over: the verified session, `exp` included. */
function admin(adminId: number, expiresAt: Date, sessionId = 's-1'): AdminPrincipal {
  return { kind: 'admin', adminId, expiresAt, sessionId, revoked: false };
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    return error instanceof GatewayError ? error.code : String(error);
  }
}

describe('OpenStreams', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const streams = (max = 2) => new OpenStreams({ maxPerCredential: max, now: () => new Date(NOW) });

  it('holds at most the cap per credential; other credentials are counted apart; a release frees a place', () => {
    const open = streams(2);
    const releases = [open.open(apiKey(1), () => {}), open.open(apiKey(1), () => {})];
    expect(codeOf(() => open.open(apiKey(1), () => {}))).toBe('too_many_streams');
    expect(open.open(apiKey(2), () => {})).toBeTypeOf('function');
    expect(open.open(admin(1, new Date(NOW + 60_000)), () => {})).toBeTypeOf('function');
    releases[0]!();
    releases[0]!();
    expect(open.size).toBe(3);
    expect(open.open(apiKey(1), () => {})).toBeTypeOf('function');
    expect(codeOf(() => open.open(apiKey(1), () => {}))).toBe('too_many_streams');
  });

  it('books uncounted streams (a POST answered with a stream) outside the cap, and still cuts them with the key', () => {
    const open = streams(1);
    const closed: string[] = [];
    const counted = open.open(apiKey(1), () => closed.push('counted'));
    for (let i = 0; i < 3; i++) expect(open.open(apiKey(1), () => closed.push(`answer ${i}`), undefined, false)).toBeTypeOf('function');
    expect(codeOf(() => open.open(apiKey(1), () => {}))).toBe('too_many_streams');
    expect(open.size).toBe(4);
    counted!();
    // The counted place is free again though three uncounted streams are still open.
    expect(open.open(apiKey(1), () => closed.push('counted again'))).toBeTypeOf('function');
    open.closeKey(1);
    expect(closed.sort()).toEqual(['answer 0', 'answer 1', 'answer 2', 'counted again']);
    expect(open.size).toBe(0);
    expect(open.open(apiKey(1), () => {})).toBeTypeOf('function');
  });

  it('does not book anonymous requests (public routes)', () => {
    const open = streams(1);
    for (let i = 0; i < 3; i++) expect(open.open(null, () => {})).toBeTypeOf('function');
    expect(open.size).toBe(0);
  });

  it('closeSession closes the streams of that admin session, and only those (not the same admin\'s other session, not a key\'s)', () => {
    const open = streams(4);
    const closed: string[] = [];
    const later = new Date(Date.now() + 3_600_000);
    open.open(admin(1, later, 'ended'), () => closed.push('ended'));
    open.open(admin(1, later, 'kept'), () => closed.push('kept'));
    open.open(apiKey(1), () => closed.push('key'));
    open.closeSession('ended');
    expect(closed).toEqual(['ended']);
    expect(open.size).toBe(2);
  });

  it('closeKey closes every stream of that key, and only those', () => {
    const open = streams(4);
    const closed: string[] = [];
    open.open(apiKey(1), () => closed.push('1a'));
    open.open(apiKey(1), () => closed.push('1b'));
    open.open(apiKey(2), () => closed.push('2'));
    open.closeKey(1);
    expect(closed).toEqual(['1a', '1b']);
    expect(open.size).toBe(1);
    open.closeKey(1);
    expect(closed).toEqual(['1a', '1b']);
  });

  it.each([
    { description: 'evicted after the check began: closed at once, not booked', evicted: 1, since: 'before', opened: false },
    { description: 'another key evicted: booked', evicted: 2, since: 'before', opened: true },
    { description: 'evicted before the check began: booked (the check saw it)', evicted: 1, since: 'after', opened: true },
  ])('a stream whose check was asynchronous, key $evicted: $description', ({ evicted, since, opened }) => {
    const open = streams();
    let closed = false;
    const before = performance.now();
    open.closeKey(evicted);
    const authorizedSince = since === 'before' ? before : performance.now() + 1;
    const release = open.open(apiKey(1), () => (closed = true), authorizedSince);
    expect(release === undefined).toBe(!opened);
    expect(closed).toBe(!opened);
    expect(open.size).toBe(opened ? 1 : 0);
  });

  it('closes a key\'s stream at its expires_at, and an admin\'s at the session\'s exp; timers go with their streams', () => {
    vi.useFakeTimers({ now: NOW });
    const open = new OpenStreams({ maxPerCredential: 4, now: () => new Date() });
    const closed: string[] = [];
    open.open(apiKey(1, new Date(NOW + 1_000)), () => closed.push('key'));
    open.open(admin(1, new Date(NOW + 2_000)), () => closed.push('admin'));
    const release = open.open(apiKey(2, new Date(NOW + 1_500)), () => closed.push('released'))!;
    release();
    expect(vi.getTimerCount()).toBe(2);
    vi.advanceTimersByTime(999);
    expect(closed).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(closed).toEqual(['key']);
    vi.advanceTimersByTime(1_000);
    expect(closed).toEqual(['key', 'admin']);
    expect(open.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('an already expired credential is closed at once and not booked', () => {
    const open = streams();
    let closed = false;
    expect(open.open(apiKey(1, new Date(NOW)), () => (closed = true))).toBeUndefined();
    expect(closed).toBe(true);
    expect(open.size).toBe(0);
  });

  it('closeApiKeyStreams (the revocation subscription lapsed) closes every key\'s stream, not the admin sessions\' tunnels', () => {
    const open = streams(4);
    const closed: string[] = [];
    open.open(apiKey(1), () => closed.push('key 1'));
    open.open(apiKey(2), () => closed.push('key 2'));
    open.open(admin(1, new Date(NOW + 60_000)), () => closed.push('admin'));
    open.closeApiKeyStreams();
    expect(closed).toEqual(['key 1', 'key 2']);
    expect(open.size).toBe(1);
  });
});
