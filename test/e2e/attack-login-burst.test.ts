import { afterEach, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, ADMIN_PASSWORD, type GatewayProcess } from '../support/gateway-process.ts';
import { request, type JsonResponse } from '../support/http.ts';
import { metric, startReplicas, waitForRedis } from '../support/replicas.ts';
import { createTestDatabase, postgresUrl, redisUrl, type TestDatabase } from '../support/services.ts';

/** The promise: at most this many failed logins per email and per client address are ever checked in 15 minutes. */
const LIMIT = 10;
const BURST = 1000;
const CORRECT_IN_BURST = 50;
/** Real argon2id cost: the race only shows when a verify takes real time. */
const REAL_ARGON2 = { ARGON2_MEMORY_KIB: '19456', ARGON2_TIME_COST: '2' };

function login(gateway: GatewayProcess, password: string): Promise<JsonResponse> {
  return request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json: { email: ADMIN_EMAIL, password } });
}

/** argon2id verifies of login passwords, summed over the replicas. */
async function loginVerifies(gateways: GatewayProcess[]): Promise<number> {
  const counts = await Promise.all(gateways.map((gateway) => metric(gateway, 'gatehouse_argon2_login_verifications_total')));
  return counts.reduce((sum, count) => sum + count, 0);
}

/**
 * 1,000 wrong passwords for one email at the same moment, spread over the replicas; once the
 * first 429 proves the limit reached, the correct password is sent 50 times into the same burst.
 */
async function attack(gateways: GatewayProcess[]) {
  let limitReached!: () => void;
  const firstRefusal = new Promise<void>((resolve) => (limitReached = resolve));
  const wrong = Array.from({ length: BURST }, async (_, i) => {
    const response = await login(gateways[i % gateways.length]!, `wrong password ${i}`);
    if (response.status === 429) limitReached();
    return response;
  });
  await firstRefusal;
  const correct = Array.from({ length: CORRECT_IN_BURST }, (_, i) => login(gateways[i % gateways.length]!, ADMIN_PASSWORD));
  return { wrong: await Promise.all(wrong), correct: await Promise.all(correct) };
}

/** Statuses and codes of a burst's answers, for a failure message. */
function summary(responses: JsonResponse[]): string {
  const counts = new Map<string, number>();
  for (const { status, body } of responses) counts.set(`${status} ${body?.code ?? ''}`, (counts.get(`${status} ${body?.code ?? ''}`) ?? 0) + 1);
  return JSON.stringify(Object.fromEntries(counts));
}

function expectRefused(responses: JsonResponse[]): void {
  for (const response of responses) {
    expect(response.status, response.text).toBe(429);
    expect(response.body.code).toBe('rate_limited');
    expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  }
}

/**
 * The burst, then what it must leave behind: at most LIMIT argon2 checks (and at least one), at
 * most LIMIT wrong passwords answered 401, every other answer (the correct password's included) 429.
 */
async function attackHeld(gateways: GatewayProcess[]): Promise<{ wrong: JsonResponse[]; before: number }> {
  const before = await loginVerifies(gateways);
  const { wrong, correct } = await attack(gateways);
  expect(await loginVerifies(gateways), summary(wrong)).toBeLessThanOrEqual(before + LIMIT);
  expect(await loginVerifies(gateways)).toBeGreaterThan(before);
  expect(wrong.filter((response) => response.status === 401).length).toBeLessThanOrEqual(LIMIT);
  expectRefused(wrong.filter((response) => response.status !== 401));
  expectRefused(correct);
  return { wrong, before };
}

describe('attack: a burst of wrong passwords for one admin email', () => {
  let gateways: GatewayProcess[] = [];
  let database: TestDatabase | undefined;
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.stop()));
    gateways = [];
    await database?.drop();
    database = undefined;
  });

  it('on one replica: at most 10 are argon2-checked, the rest are 429 with no work, and the right password gets no token', { timeout: 120_000 }, async () => {
    gateways = await startReplicas(1, { ...REAL_ARGON2, LOG_LEVEL: 'warn' });
    await attackHeld(gateways);
    expect(await metric(gateways[0]!, 'gatehouse_logins_total', { result: 'success' })).toBe(0);
  });

  describe.skipIf(postgresUrl() === null || redisUrl() === null)('on two replicas sharing PostgreSQL and Redis', () => {
    it('at most 10 are argon2-checked over both, and the right password gets no token on either', { timeout: 120_000 }, async () => {
      database = await createTestDatabase();
      gateways = await startReplicas(2, { ...REAL_ARGON2, DATABASE_URL: database.url, REDIS_URL: redisUrl()!, LOG_LEVEL: 'warn' });
      await waitForRedis(gateways, 'ok');
      const { wrong, before } = await attackHeld(gateways);
      // Still refused afterwards, on both replicas: the count is shared.
      for (const gateway of gateways) expectRefused([await login(gateway, ADMIN_PASSWORD)]);
      expect(await loginVerifies(gateways), summary(wrong)).toBeLessThanOrEqual(before + LIMIT);
    });
  });
});
