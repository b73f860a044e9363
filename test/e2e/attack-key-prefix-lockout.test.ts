import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { appendChecksum, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG } from '../../src/credentials/key-format.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { EVENTS_PATH, metric, startReplicas, useKey, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** The promise: once a prefix is throttled, at most one key of it is verified per second. */
const PROBE_INTERVAL_S = 1;
/** How long guesses go on after the throttle, to measure what they still cost. */
const GUESSING_S = 3;

/** A well-formed key (valid checksum) carrying `prefix` and a random, wrong secret. */
function forgedKey(prefix: string): string {
  const fill = KEY_TAG.length + KEY_BODY_LENGTH - KEY_PREFIX_LENGTH;
  return appendChecksum(prefix + [...randomBytes(fill)].map((byte) => BASE62[byte % 62]).join(''));
}

async function mismatches(gateways: GatewayProcess[]): Promise<number> {
  const counts = await Promise.all(gateways.map((gateway) => metric(gateway, 'gatehouse_argon2_verifications_total', { result: 'mismatch' })));
  return counts.reduce((sum, count) => sum + count, 0);
}

/** Guesses behind the prefix, one at a time, until the gateway answers 429. */
async function guessUntilThrottled(gateway: GatewayProcess, prefix: string): Promise<void> {
  for (let guesses = 0; guesses < 200; guesses++) {
    const { status } = await useKey(gateway, forgedKey(prefix));
    if (status === 429) return;
    expect(status).toBe(401);
  }
  throw new Error('the prefix was never throttled');
}

/** `workers` concurrent guessers for `seconds`; resolves with what the guesses were answered. */
async function keepGuessing(gateway: GatewayProcess, prefix: string, seconds: number, workers = 4): Promise<number[]> {
  const until = Date.now() + seconds * 1000;
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < until) statuses.push((await useKey(gateway, forgedKey(prefix))).status);
    }),
  );
  return statuses;
}

/** Uses the real key every 100 ms until it is served; resolves with the milliseconds from the first try. */
async function firstUse(gateway: GatewayProcess, key: string): Promise<{ elapsedMs: number; statuses: number[] }> {
  const started = performance.now();
  const statuses: number[] = [];
  for (;;) {
    const { status } = await useKey(gateway, key);
    statuses.push(status);
    if (status !== 429 || performance.now() - started > 10_000) return { elapsedMs: performance.now() - started, statuses };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('attack: guesses behind a real key prefix never lock the real key out', () => {
  let gateways: GatewayProcess[] = [];
  let origin: Origin | undefined;
  let database: TestDatabase | undefined;
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    gateways = [];
    await origin?.close();
    await database?.drop();
    database = undefined;
  });

  async function newKey(on: GatewayProcess): Promise<string> {
    const response = await createKey(on.url, await loginAdmin(on.url), { name: 'victim', scopes: ['events:write'] });
    expect(response.status, response.text).toBe(201);
    return response.body.key as string;
  }

  it('one process: the key, never used before, is served within 2 s of trying while guesses stay at one verify a second', { timeout: 60_000 }, async () => {
    origin = await startOrigin();
    gateways = await startReplicas(1, { UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
    const [gateway] = gateways as [GatewayProcess];
    const key = await newKey(gateway);
    const prefix = key.slice(0, KEY_PREFIX_LENGTH);

    await guessUntilThrottled(gateway, prefix);
    const throttledAt = await mismatches(gateways);
    const guesses = await keepGuessing(gateway, prefix, GUESSING_S);
    expect(guesses.filter((status) => status === 429).length).toBeGreaterThan(guesses.length / 2);
    expect(guesses.every((status) => status === 401 || status === 429)).toBe(true);
    // One verify per interval, plus one for the interval already open when the clock started.
    expect((await mismatches(gateways)) - throttledAt).toBeLessThanOrEqual(GUESSING_S / PROBE_INTERVAL_S + 1);

    const { elapsedMs, statuses } = await firstUse(gateway, key);
    expect(statuses.at(-1)).toBe(200);
    expect(elapsedMs).toBeLessThan(2000);
    expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(1);
    expect(origin.receivedAt(EVENTS_PATH)[0]!.headers['x-auth-key-id']).toBeDefined();
  });

  describe.skipIf(postgresUrl() === null || redisUrl() === null)('two replicas sharing PostgreSQL and Redis', () => {
    it('guessed on one replica, the key is first used on the other and served within 2 s; the shared tier then serves it unthrottled', { timeout: 90_000 }, async () => {
      database = await createTestDatabase();
      origin = await startOrigin();
      gateways = await startReplicas(2, { DATABASE_URL: database.url, REDIS_URL: redisUrl()!, UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
      await waitForRedis(gateways, 'ok');
      const [guessed, fresh] = gateways as [GatewayProcess, GatewayProcess];
      const key = await newKey(guessed);
      const prefix = key.slice(0, KEY_PREFIX_LENGTH);

      await guessUntilThrottled(guessed, prefix);
      // The throttle is shared: the other replica refuses guesses of this prefix too.
      expect((await useKey(fresh, forgedKey(prefix))).status).toBe(429);
      const throttledAt = await mismatches(gateways);
      await Promise.all([keepGuessing(guessed, prefix, GUESSING_S, 2), keepGuessing(fresh, prefix, GUESSING_S, 2)]);
      // One verify per interval across both replicas, not per replica.
      expect((await mismatches(gateways)) - throttledAt).toBeLessThanOrEqual(GUESSING_S / PROBE_INTERVAL_S + 1);

      const { elapsedMs, statuses } = await firstUse(fresh, key);
      expect(statuses.at(-1)).toBe(200);
      expect(elapsedMs).toBeLessThan(2000);

      // Verified once anywhere, the key is found in the shared identity tier before the throttle is asked:
      // on the replica under attack, which never verified it, it is served at the first try.
      expect((await useKey(guessed, forgedKey(prefix))).status).toBe(429);
      expect((await useKey(guessed, key)).status).toBe(200);
      expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(2);
    });
  });
});
