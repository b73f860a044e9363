/**
 * `node bench/paced-floor.ts`: the latency the machine itself gives the `invalid-keys` client.
 * The same paced client (500/s, 16 connections, 10 s) against the upstream and the node floor,
 * with no gateway and no store: what the gateway's figure cannot go below on this machine.
 */
import { percentile } from './client.ts';
import { paced } from './paced.ts';
import { freePort, spawnServer } from './processes.ts';
import { EVENT_BODY, EVENTS_PATH } from './scenarios.ts';

const RATE = 500;
const originPort = await freePort();
const origin = await spawnServer({
  name: 'origin',
  command: process.execPath,
  args: ['bench/origin.ts'],
  env: { PORT: String(originPort), HOST: '127.0.0.1' },
  readyUrl: `http://127.0.0.1:${originPort}/`,
});
const floorPort = await freePort();
const floor = await spawnServer({
  name: 'node-floor',
  command: process.execPath,
  args: ['bench/node-floor.ts'],
  env: { PORT: String(floorPort), HOST: '127.0.0.1', UPSTREAM_URL: `http://127.0.0.1:${originPort}` },
  readyUrl: `http://127.0.0.1:${floorPort}/`,
});
const exchange = { path: EVENTS_PATH, method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer x' }, body: EVENT_BODY };
try {
  for (const [name, port] of [['direct', originPort], ['node-floor', floorPort]] as const) {
    const sorted = (await paced(`http://127.0.0.1:${port}`, () => exchange, RATE, 10, 16, 1)).map((answer) => answer.ms).sort((a, b) => a - b);
    const ms = (p: number) => percentile(sorted, p).toFixed(2);
    process.stdout.write(`${name}: ${RATE}/s paced, p50 ${ms(50)} ms, p99 ${ms(99)} ms, p99.9 ${ms(99.9)} ms\n`);
  }
} finally {
  await floor.stop();
  await origin.stop();
}
