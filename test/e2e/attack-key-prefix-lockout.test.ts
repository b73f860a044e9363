import { randomBytes } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { appendChecksum, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG } from '../../src/credentials/key-format.ts';
import type { GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';
import { request } from '../support/http.ts';
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

/** The flood's source address: Linux routes all of 127.0.0.0/8 locally, the gateway listens on 127.0.0.1. */
const FLOOD_ADDRESS = '127.0.0.2';
/** Guessers that never stop, each waiting only for its previous answer. */
const FLOOD_WORKERS = 8;

interface Flood {
  /** Answers so far, with when each came (performance.now()). */
  answers: { status: number; at: number }[];
  stop(): Promise<void>;
}

/** A guess sent from `localAddress`, on a keep-alive connection of `agent`. */
function guessFrom(gateway: GatewayProcess, prefix: string, agent: Agent): Promise<number> {
  const body = JSON.stringify({ type: 'test' });
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest(
      `${gateway.url}${EVENTS_PATH}`,
      {
        method: 'POST',
        agent,
        localAddress: FLOOD_ADDRESS,
        headers: { authorization: `Bearer ${forgedKey(prefix)}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
        response.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

/** Guesses from FLOOD_ADDRESS, one at a time, until the prefix is throttled: 127.0.0.1 stays new to the gate. */
async function throttleFromFloodAddress(gateway: GatewayProcess, prefix: string): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let guesses = 0; guesses < 200; guesses++) {
      const status = await guessFrom(gateway, prefix, agent);
      if (status === 429) return;
      expect(status).toBe(401);
    }
    throw new Error('the prefix was never throttled');
  } finally {
    agent.destroy();
  }
}

/** FLOOD_WORKERS guessers from FLOOD_ADDRESS, none ever pausing, until stopped. */
function startFlood(gateway: GatewayProcess, prefix: string): Flood {
  const agent = new Agent({ keepAlive: true, maxSockets: FLOOD_WORKERS });
  const answers: Flood['answers'] = [];
  let stopping = false;
  const workers = Array.from({ length: FLOOD_WORKERS }, async () => {
    while (!stopping) answers.push({ status: await guessFrom(gateway, prefix, agent), at: performance.now() });
  });
  return {
    answers,
    stop: async () => {
      stopping = true;
      await Promise.all(workers);
      agent.destroy();
    },
  };
}

/**
 * The real key's first use from 127.0.0.1, retried after each 429's Retry-After (200 ms without
 * one), as a well-behaved client does; resolves when it is served or after 10 s.
 */
async function firstUseHonouringRetryAfter(gateway: GatewayProcess, key: string): Promise<{ elapsedMs: number; statuses: number[]; servedAt: number }> {
  const started = performance.now();
  const statuses: number[] = [];
  for (;;) {
    const response = await request(`${gateway.url}${EVENTS_PATH}`, { method: 'POST', token: key, json: { type: 'test' } });
    statuses.push(response.status);
    const now = performance.now();
    if (response.status !== 429 || now - started > 10_000) return { elapsedMs: now - started, statuses, servedAt: now };
    const retryAfterS = Number(response.headers.get('retry-after'));
    await new Promise((resolve) => setTimeout(resolve, retryAfterS > 0 ? retryAfterS * 1000 : 200));
  }
}

/** How long the flood runs before the real key's first try, and on after it is served. */
const FLOOD_LEAD_MS = 2_000;
const FLOOD_TAIL_MS = 500;

/**
 * Throttles the key's prefix, floods it on `flooded` from FLOOD_ADDRESS, and uses the key for
 * the first time on `served` from 127.0.0.1 while the flood goes on.
 */
async function firstUseUnderFlood(gateways: GatewayProcess[], flooded: GatewayProcess, served: GatewayProcess, key: string) {
  const prefix = key.slice(0, KEY_PREFIX_LENGTH);
  await throttleFromFloodAddress(flooded, prefix);
  const before = await mismatches(gateways);
  const flood = startFlood(flooded, prefix);
  const floodStarted = performance.now();
  try {
    await new Promise((resolve) => setTimeout(resolve, FLOOD_LEAD_MS));
    const use = await firstUseHonouringRetryAfter(served, key);
    await new Promise((resolve) => setTimeout(resolve, FLOOD_TAIL_MS));
    return { use, flood, floodStarted, floodSeconds: (performance.now() - floodStarted) / 1000, before };
  } finally {
    await flood.stop();
  }
}

/** What every flood must show: the key served in time, during a real flood, which bought at most one verify a second. */
async function expectFairUnderFlood(gateways: GatewayProcess[], outcome: Awaited<ReturnType<typeof firstUseUnderFlood>>): Promise<void> {
  const { use, flood, floodStarted, floodSeconds, before } = outcome;
  expect(use.statuses.at(-1), use.statuses.join()).toBe(200);
  expect(use.elapsedMs).toBeLessThan(2000);
  // A flood, and still going when the key was served.
  expect(flood.answers.length / floodSeconds).toBeGreaterThan(100);
  expect(flood.answers.some(({ at }) => at > use.servedAt)).toBe(true);
  expect(flood.answers.filter(({ at }) => at > floodStarted).every(({ status }) => status === 401 || status === 429)).toBe(true);
  // At most one verify per interval for the prefix, plus one for the interval open when the clock started.
  expect((await mismatches(gateways)) - before).toBeLessThanOrEqual(Math.ceil(floodSeconds / PROBE_INTERVAL_S) + 1);
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

  it('one process, a flood that never stops from another address: the key is served within 2 s of its first try', { timeout: 60_000 }, async () => {
    origin = await startOrigin();
    gateways = await startReplicas(1, { UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
    const [gateway] = gateways as [GatewayProcess];
    const key = await newKey(gateway);

    await expectFairUnderFlood(gateways, await firstUseUnderFlood(gateways, gateway, gateway, key));
    expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(1);
    expect(origin.receivedAt(EVENTS_PATH)[0]!.headers['x-auth-key-id']).toBeDefined();
  });

  describe.skipIf(postgresUrl() === null || redisUrl() === null)('two replicas sharing PostgreSQL and Redis', () => {
    it('a flood that never stops on one replica: a key first used on the other is served within 2 s, and the reverse', { timeout: 90_000 }, async () => {
      database = await createTestDatabase();
      origin = await startOrigin();
      gateways = await startReplicas(2, { DATABASE_URL: database.url, REDIS_URL: redisUrl()!, UPSTREAM_URL: origin.url, LOG_LEVEL: 'warn' });
      await waitForRedis(gateways, 'ok');
      const [one, two] = gateways as [GatewayProcess, GatewayProcess];

      await expectFairUnderFlood(gateways, await firstUseUnderFlood(gateways, one, two, await newKey(one)));
      expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(1);
      await expectFairUnderFlood(gateways, await firstUseUnderFlood(gateways, two, one, await newKey(one)));
      expect(origin.receivedAt(EVENTS_PATH)).toHaveLength(2);
    });


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
