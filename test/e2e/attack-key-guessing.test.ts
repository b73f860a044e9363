import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendChecksum, isWellFormedKey, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH } from '../../src/credentials/key-format.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A well-formed key (valid checksum) with the given prefix and a random, wrong secret. */
function forgedKey(prefix: string): string {
  const fill = KEY_BODY_LENGTH + 4 - KEY_PREFIX_LENGTH;
  const body = [...randomBytes(fill)].map((byte) => BASE62[byte % 62]).join('');
  return appendChecksum(prefix + body);
}

/**
 * 10,000 well-formed keys carrying a real key's prefix and wrong secrets: the gateway must
 * not burn argon2 on each, and the real key must keep being served.
 */
describe('attack: guessing secrets behind a real key prefix', () => {
  let f: ProxyFixture;
  let key: string;

  beforeAll(async () => {
    // Real argon2 parameters: the attack is only an attack if verifies are expensive.
    f = await startProxyFixture({ ARGON2_MEMORY_KIB: '19456', ARGON2_TIME_COST: '2' });
    key = (await f.key({ scopes: ['events:write'] })).key;
  });
  afterAll(async () => {
    await f?.close();
  });

  it('keeps serving the real key while 10,000 forged keys are refused, none forwarded', { timeout: 120_000 }, async () => {
    const prefix = key.slice(0, KEY_PREFIX_LENGTH);
    expect(isWellFormedKey(forgedKey(prefix))).toBe(true);
    const send = (token: string) =>
      fetch(`${f.gateway.url}/api/v1/agents/1/events`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
    expect((await send(key)).status).toBe(200);
    f.origin.clear();

    const statuses = new Map<number, number>();
    let forged = 0;
    const attackers = Array.from({ length: 20 }, async () => {
      while (forged < 10_000) {
        forged++;
        const response = await send(forgedKey(prefix));
        await response.arrayBuffer();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      }
    });
    const realStatuses: number[] = [];
    const real = (async () => {
      while (forged < 10_000) {
        const response = await send(key);
        await response.arrayBuffer();
        realStatuses.push(response.status);
        // Paced by the event loop, not a timer: the attackers' answers get their turn between its calls.
        await new Promise((resolve) => setImmediate(resolve));
      }
    })();
    await Promise.all([...attackers, real]);

    expect([...statuses.keys()].every((status) => status === 401 || status === 429)).toBe(true);
    expect((statuses.get(401) ?? 0) + (statuses.get(429) ?? 0)).toBe(forged);
    expect(statuses.get(429) ?? 0).toBeGreaterThan(9_000);
    expect(realStatuses.length).toBeGreaterThan(5);
    expect(realStatuses.every((status) => status === 200)).toBe(true);
    // Served throughout (a hang fails the test's own timeout); how fast is BENCHMARKS.md's figure.
    expect(f.origin.received.every((received) => received.headers['x-auth-key-id'] !== undefined)).toBe(true);
    expect(f.origin.received).toHaveLength(realStatuses.length);
  });
});
