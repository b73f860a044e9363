import { Client, percentile, tally, type Exchange } from './client.ts';
import { argon2Verifies, type GatewayHandle } from './gateway.ts';
import type { Extras } from './report.ts';
import { EVENT_BODY, EVENTS_PATH } from './scenarios.ts';

function eventWith(key: string): Exchange {
  return { path: EVENTS_PATH, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: EVENT_BODY };
}

/**
 * The storm: every key's first `perKey` uses all in flight at once, all keys together. The
 * gateway must verify each key once (one singleflight per key); the rest wait for it.
 */
export async function storm(gateway: GatewayHandle, keys: readonly string[], perKey: number): Promise<NonNullable<Extras['storm']>> {
  const client = new Client(gateway.url, keys.length * perKey);
  try {
    const before = await argon2Verifies(gateway.opsUrl);
    const exchanges = keys.flatMap((key) => Array.from({ length: perKey }, () => eventWith(key)));
    const answers = await client.sendAll(exchanges, exchanges.length);
    const verifies = (await argon2Verifies(gateway.opsUrl)) - before;
    return { keys: keys.length, requestsPerKey: perKey, verifies, perKey: verifies / keys.length, statuses: tally(answers) };
  } finally {
    await client.close();
  }
}

/** `cold-keys`: each never-seen key used once, `inFlight` at a time — verifies per second at the configured argon2id cost. */
export async function coldKeys(gateway: GatewayHandle, keys: readonly string[], inFlight: number): Promise<NonNullable<Extras['cold']>> {
  const client = new Client(gateway.url, inFlight);
  try {
    const before = await argon2Verifies(gateway.opsUrl);
    const started = performance.now();
    const answers = await client.sendAll(keys.map(eventWith), inFlight);
    const seconds = (performance.now() - started) / 1000;
    const verifies = (await argon2Verifies(gateway.opsUrl)) - before;
    const latencies = answers.map((answer) => answer.ms).sort((a, b) => a - b);
    return {
      keys: keys.length,
      verifies,
      perKey: verifies / keys.length,
      verifiesPerSecond: verifies / seconds,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      statuses: tally(answers),
    };
  } finally {
    await client.close();
  }
}
