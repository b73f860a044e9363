import { randomInt } from 'node:crypto';
import { appendChecksum, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG, keyPrefixOf } from '../src/credentials/key-format.ts';
import { argon2Verifies, type GatewayHandle } from './gateway.ts';
import { percentile, tally, type Answer, type Exchange } from './client.ts';
import { pacedInWorker } from './paced.ts';
import type { Extras } from './report.ts';
import { EVENT_BODY, EVENTS_PATH } from './scenarios.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Well-formed keys (valid checksum) with the real key's prefix and a wrong secret, all distinct. */
export function wrongKeysFor(realKey: string, count: number): string[] {
  const prefix = keyPrefixOf(realKey);
  const restLength = KEY_TAG.length + KEY_BODY_LENGTH - KEY_PREFIX_LENGTH;
  const keys = new Set<string>();
  while (keys.size < count) {
    let rest = '';
    for (let i = 0; i < restLength; i++) rest += BASE62[randomInt(62)];
    const key = appendChecksum(prefix + rest);
    if (key !== realKey) keys.add(key);
  }
  return [...keys];
}

export interface InvalidOptions {
  validKey: string;
  validRate: number;
  attackRate: number;
  seconds: number;
  /**
   * Sent before each measured run by both streams, at their rates, and not measured: it opens
   * their connections and warms up the code paths under study (a cold refusal path would show
   * as the attack's cost).
   */
  warmupSeconds: number;
  /**
   * The upstream's origin: the control run sends the same attack there instead, so the
   * gateway does none of its work, and shows what that much traffic costs the valid stream on
   * this machine whoever answers it.
   */
  controlOrigin: string;
}

/**
 * `invalid-keys`: the valid key's latency at a steady rate, well below saturation so its p99
 * shows interference and not queueing, first alone, then while distinct wrong keys behind the
 * same real prefix arrive at `attackRate`, then (the control) while the same attack goes to the
 * upstream directly. Both streams are paced (open loop, bench/paced.ts), and each run begins
 * with `warmupSeconds` of both that are not measured.
 */
export async function invalidKeys(gateway: GatewayHandle, options: InvalidOptions): Promise<NonNullable<Extras['invalid']>> {
  const validExchange: Exchange = {
    path: EVENTS_PATH,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${options.validKey}` },
    body: EVENT_BODY,
  };
  // Timed in a worker thread of its own: the benchmark's main thread holds every seeded key, and
  // its garbage collections would show up as the gateway's latency.
  const valid = () =>
    pacedInWorker({ origin: gateway.url, exchanges: [validExchange], rate: options.validRate, seconds: options.seconds, connections: 16, warmupSeconds: options.warmupSeconds });
  const baseline = latencies(await valid());
  const wrongExchanges = wrongKeysFor(options.validKey, Math.ceil(options.attackRate * (options.warmupSeconds + options.seconds))).map((key) => ({
    ...validExchange,
    headers: { ...validExchange.headers, authorization: `Bearer ${key}` },
  }));
  // In a worker thread: the attack's client work must not delay the valid stream's timing.
  const attack = (origin: string) =>
    pacedInWorker({
      origin,
      exchanges: wrongExchanges,
      rate: options.attackRate,
      seconds: options.seconds,
      connections: 8,
      warmupSeconds: options.warmupSeconds,
    });
  const before = await argon2Verifies(gateway.opsUrl);
  const [measuredAnswers, hammer] = await Promise.all([valid(), attack(gateway.url)]);
  const argon2DuringAttack = (await argon2Verifies(gateway.opsUrl)) - before;
  const measured = latencies(measuredAnswers);
  const [controlAnswers] = await Promise.all([valid(), attack(options.controlOrigin)]);
  return {
    validRate: options.validRate,
    attackRate: options.attackRate,
    baselineP99: baseline.p99,
    controlP99: latencies(controlAnswers).p99,
    p50: measured.p50,
    p99: measured.p99,
    p999: measured.p999,
    validNon2xx: measuredAnswers.filter((answer) => answer.status < 200 || answer.status >= 300).length,
    attackAchieved: hammer.length / options.seconds,
    attackStatuses: tally(hammer),
    argon2DuringAttack,
  };
}

function latencies(answers: readonly Answer[]): { p50: number; p99: number; p999: number } {
  const sorted = answers.map((answer) => answer.ms).filter((ms) => !Number.isNaN(ms)).sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99), p999: percentile(sorted, 99.9) };
}
