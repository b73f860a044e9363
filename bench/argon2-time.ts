import { Argon2Hasher } from '../src/crypto/argon2.ts';
import { generateKey } from '../src/credentials/key-format.ts';
import { percentile } from './client.ts';
import type { Extras } from './report.ts';

export interface Argon2Params {
  memoryKiB: number;
  timeCost: number;
  parallelism: number;
}

/** One argon2id verify at the given parameters, timed alone (no concurrency), `count` times. */
export async function timeArgon2Verify(params: Argon2Params, count: number): Promise<NonNullable<Extras['argon2']>> {
  const hasher = new Argon2Hasher({ ...params, concurrency: 1 });
  const key = generateKey();
  const encoded = await hasher.hash(key);
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    if (!(await hasher.verify(encoded, key))) throw new Error('argon2 verify of its own hash failed');
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return {
    params: `m=${params.memoryKiB} KiB, t=${params.timeCost}, p=${params.parallelism}`,
    verifyMsMedian: percentile(times, 50),
    verifyMsP90: percentile(times, 90),
  };
}
