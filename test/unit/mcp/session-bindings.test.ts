import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { MemorySessionBindings } from '../../../src/mcp/session-bindings.ts';
import {
  legacySessionIdOfEndpoint,
  legacySessionIdOfQuery,
  presentedSessionId,
} from '../../../src/mcp/session-ids.ts';

function clock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

describe('MemorySessionBindings', () => {
  it('binds a session to the key that opened it; another key is told other_key', async () => {
    const bindings = new MemorySessionBindings();
    expect(await bindings.check('s1', 1)).toBe('unknown');
    expect(await bindings.bind('s1', 1)).toBe(true);
    expect(await bindings.check('s1', 1)).toBe('bound');
    expect(await bindings.check('s1', 2)).toBe('other_key');
  });

  it('never moves a binding to another key; binding again to the same key is fine', async () => {
    const bindings = new MemorySessionBindings();
    await bindings.bind('s1', 1);
    expect(await bindings.bind('s1', 2)).toBe(false);
    expect(await bindings.check('s1', 1)).toBe('bound');
    expect(await bindings.bind('s1', 1)).toBe(true);
  });

  it('forgets a binding after the time to live, counted from its last use', async () => {
    const time = clock();
    const bindings = new MemorySessionBindings({ ttlMs: 1000, now: time.now });
    await bindings.bind('s1', 1);
    time.advance(900);
    expect(await bindings.check('s1', 1)).toBe('bound');
    time.advance(900);
    expect(await bindings.check('s1', 1)).toBe('bound');
    time.advance(1000);
    expect(await bindings.check('s1', 1)).toBe('unknown');
    expect(await bindings.check('s1', 2)).toBe('unknown');
  });

  it('a check by another key does not extend the binding', async () => {
    const time = clock();
    const bindings = new MemorySessionBindings({ ttlMs: 1000, now: time.now });
    await bindings.bind('s1', 1);
    time.advance(900);
    expect(await bindings.check('s1', 2)).toBe('other_key');
    time.advance(200);
    expect(await bindings.check('s1', 1)).toBe('unknown');
  });

  it('unbind ends it', async () => {
    const bindings = new MemorySessionBindings();
    await bindings.bind('s1', 1);
    await bindings.unbind('s1');
    expect(await bindings.check('s1', 1)).toBe('unknown');
  });

  it('holds at most maxEntries, dropping the least recently used', async () => {
    const bindings = new MemorySessionBindings({ maxEntries: 2 });
    await bindings.bind('a', 1);
    await bindings.bind('b', 1);
    await bindings.check('a', 1);
    await bindings.bind('c', 1);
    expect(bindings.size).toBe(2);
    expect(await bindings.check('b', 1)).toBe('unknown');
    expect(await bindings.check('a', 1)).toBe('bound');
    expect(await bindings.check('c', 1)).toBe('bound');
  });
});

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (error instanceof GatewayError) return error.code;
    throw error;
  }
  return undefined;
}

describe('session ids as presented', () => {
  it('Mcp-Session-Id: none, one, or refused', () => {
    expect(presentedSessionId(['Host', 'x'])).toBeUndefined();
    expect(presentedSessionId(['Mcp-Session-Id', 'abc-123'])).toBe('abc-123');
    expect(codeOf(() => presentedSessionId(['mcp-session-id', 'a', 'MCP-SESSION-ID', 'b']))).toBe('duplicate_header');
    expect(codeOf(() => presentedSessionId(['mcp-session-id', '']))).toBe('validation_failed');
    expect(codeOf(() => presentedSessionId(['mcp-session-id', 'a b']))).toBe('validation_failed');
    expect(codeOf(() => presentedSessionId(['mcp-session-id', 'x'.repeat(257)]))).toBe('validation_failed');
  });

  it('legacy sessionId in the query: exactly one', () => {
    expect(legacySessionIdOfQuery('?sessionId=abc')).toBe('abc');
    expect(legacySessionIdOfQuery('?session%49d=abc')).toBe('abc');
    expect(codeOf(() => legacySessionIdOfQuery(''))).toBe('validation_failed');
    expect(codeOf(() => legacySessionIdOfQuery('?sessionId=a&sessionId=b'))).toBe('validation_failed');
    expect(codeOf(() => legacySessionIdOfQuery('?sessionId=a&session%49d=b'))).toBe('validation_failed');
    expect(codeOf(() => legacySessionIdOfQuery('?sessionId='))).toBe('validation_failed');
  });

  it('legacy endpoint event: the one sessionId of its URL', () => {
    expect(legacySessionIdOfEndpoint('/messages?sessionId=1b4e')).toBe('1b4e');
    expect(legacySessionIdOfEndpoint('http://upstream.test/messages?x=1&sessionId=1b4e')).toBe('1b4e');
    expect(legacySessionIdOfEndpoint('/messages')).toBeUndefined();
    expect(legacySessionIdOfEndpoint('/messages?sessionId=a&sessionId=b')).toBeUndefined();
  });
});
