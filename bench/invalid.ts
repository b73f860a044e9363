import { randomInt } from 'node:crypto';
import { appendChecksum, KEY_BODY_LENGTH, KEY_PREFIX_LENGTH, KEY_TAG, keyPrefixOf } from '../src/credentials/key-format.ts';
import { argon2Verifies, type GatewayHandle } from './gateway.ts';
import { runLoad, type LoadSpec } from './load.ts';
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
}

/**
 * `invalid-keys`: the valid key's latency at a steady rate (well below saturation, so its p99
 * shows interference, not queueing), first alone, then while distinct wrong keys behind the same
 * real prefix arrive at `attackRate`. autocannon for both: wrk cannot hold a rate.
 */
export async function invalidKeys(gateway: GatewayHandle, options: InvalidOptions): Promise<NonNullable<Extras['invalid']>> {
  const valid: LoadSpec = {
    url: `${gateway.url}${EVENTS_PATH}`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${options.validKey}` },
    body: EVENT_BODY,
    connections: 16,
    seconds: options.seconds,
    rate: options.validRate,
  };
  await runLoad('autocannon', { ...valid, seconds: 1 });
  const baseline = await runLoad('autocannon', valid);
  const attack: LoadSpec = {
    url: `${gateway.url}${EVENTS_PATH}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: EVENT_BODY,
    rotate: wrongKeysFor(options.validKey, Math.ceil(options.attackRate * (options.seconds + 1))),
    connections: 8,
    seconds: options.seconds,
    rate: options.attackRate,
  };
  const before = await argon2Verifies(gateway.opsUrl);
  const [measured, hammer] = await Promise.all([runLoad('autocannon', valid), runLoad('autocannon', attack)]);
  const argon2DuringAttack = (await argon2Verifies(gateway.opsUrl)) - before;
  return {
    validRate: options.validRate,
    attackRate: options.attackRate,
    baselineP99: baseline.p99,
    p50: measured.p50,
    p99: measured.p99,
    p999: measured.p999,
    validNon2xx: measured.non2xx + measured.errors,
    attackAchieved: hammer.rps,
    attackStatuses: hammer.statuses ?? {},
    argon2DuringAttack,
  };
}
