import { Client, tally, type Exchange } from './client.ts';
import { argon2Verifies, readMetric, type GatewayHandle } from './gateway.ts';
import { collectGarbage } from './inspector.ts';
import { sleep } from './processes.ts';
import type { RssFigure } from './report.ts';
import { EVENT_BODY, EVENTS_PATH } from './scenarios.ts';

const MB = 1024 * 1024;

function eventWith(key: string): Exchange {
  return { path: EVENTS_PATH, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: EVENT_BODY };
}

/** Uses every key once (their first use: store read and argon2id verify), `inFlight` at a time; throws unless all are 2xx. */
export async function warmKeys(gateway: GatewayHandle, keys: readonly string[], inFlight: number): Promise<void> {
  const client = new Client(gateway.url, inFlight);
  try {
    const answers = await client.sendAll(keys.map(eventWith), inFlight);
    const refused = answers.filter((answer) => answer.status >= 300);
    if (refused.length > 0) throw new Error(`warming ${keys.length} keys: ${JSON.stringify(tally(refused))}`);
  } finally {
    await client.close();
  }
}

/**
 * Waits until the process's RSS has stayed within 5% for 2 s (at most 20 s). Right after start
 * V8 may still be compiling (on PGlite, its WASM took RSS up by ~500 MB for a few seconds and
 * then gave it back): an idle figure taken then measures the compiler.
 */
async function settled(gateway: GatewayHandle): Promise<void> {
  const deadline = Date.now() + 20_000;
  let stableSince = Date.now();
  let last = gateway.process.rss() ?? 0;
  while (Date.now() < deadline) {
    await sleep(250);
    const now = gateway.process.rss() ?? 0;
    if (Math.abs(now - last) > last * 0.05) {
      stableSince = Date.now();
      last = now;
    } else if (Date.now() - stableSince >= 2_000) {
      return;
    }
  }
}

/**
 * RSS of a fresh gateway process, idle and then with every key in `keys` verified and cached
 * (`KEY_CACHE_SIZE` must hold them): as found 3 s after the last first use, and again after a
 * full GC (through the inspector), with V8's live heap. A sample of the keys is then used again:
 * no argon2 verify may happen, which shows they were all still cached.
 */
export async function measureRss(gateway: GatewayHandle, keys: readonly string[], inspectPort: number): Promise<RssFigure> {
  const heap = async () => ({
    used: (await readMetric(gateway.opsUrl, 'gatehouse_nodejs_heap_size_used_bytes')) / MB,
    total: (await readMetric(gateway.opsUrl, 'gatehouse_nodejs_heap_size_total_bytes')) / MB,
    external: (await readMetric(gateway.opsUrl, 'gatehouse_nodejs_external_memory_bytes')) / MB,
  });
  await settled(gateway);
  await collectGarbage(inspectPort);
  const idle = (gateway.process.rss() ?? Number.NaN) / MB;
  const idleHeap = await heap();
  await warmKeys(gateway, keys, 16);
  // The write-behind of last_used_at runs every second: let it finish.
  await sleep(3_000);
  const cached = (gateway.process.rss() ?? Number.NaN) / MB;
  const before = await argon2Verifies(gateway.opsUrl);
  const step = Math.max(1, Math.floor(keys.length / 1_000));
  await warmKeys(gateway, keys.filter((_key, index) => index % step === 0), 16);
  const verifiesOnRepeat = (await argon2Verifies(gateway.opsUrl)) - before;
  await collectGarbage(inspectPort);
  await sleep(500);
  const afterGc = (gateway.process.rss() ?? Number.NaN) / MB;
  const cachedHeap = await heap();
  return {
    keys: keys.length,
    idleMb: idle,
    peakMb: (gateway.process.peakRss() ?? Number.NaN) / MB,
    idleHeapUsedMb: idleHeap.used,
    cachedMb: cached,
    afterGcMb: afterGc,
    heapUsedMb: cachedHeap.used,
    heapTotalMb: cachedHeap.total,
    externalMb: cachedHeap.external,
    verifiesOnRepeat,
  };
}
