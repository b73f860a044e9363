import { Worker } from 'node:worker_threads';
import { Client, type Answer, type Exchange } from './client.ts';
import type { PacedWorkerData } from './paced-worker.ts';
import { sleep } from './processes.ts';

/**
 * Open-loop load: request `i` leaves at `start + i / rate` whatever became of the ones before
 * it, so a slow answer shows as latency instead of holding the sender back. (autocannon's
 * rate is a budget per second that each connection spends back to back, a burst at full
 * concurrency every second: its p99 measures that queue, not the interference under study.)
 * A connection error is an answer with status 0. The first `warmupSeconds` are sent at the same
 * pace but not returned: they open the connections and bring the client's and the server's
 * code for this traffic up to speed.
 */
export async function paced(origin: string, exchangeAt: (index: number) => Exchange, rate: number, seconds: number, connections: number, warmupSeconds = 0): Promise<Answer[]> {
  const client = new Client(origin, connections);
  const warmup = Math.round(rate * warmupSeconds);
  const total = warmup + Math.round(rate * seconds);
  const answers: Array<Promise<Answer>> = [];
  const start = performance.now();
  try {
    for (let index = 0; index < total; index++) {
      // Timers fire to the millisecond at best: sleep until the next request is due, then send all that are.
      const wait = start + (index * 1000) / rate - performance.now();
      if (wait >= 1) await sleep(wait);
      answers.push(client.send(exchangeAt(index)).catch(() => ({ status: 0, code: 'connection error', ms: Number.NaN })));
    }
    return (await Promise.all(answers)).slice(warmup);
  } finally {
    await client.close();
  }
}

/** `paced` in a worker thread of its own: for a stream that runs beside one being timed. */
export function pacedInWorker(data: PacedWorkerData): Promise<Answer[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./paced-worker.ts', import.meta.url), { workerData: data });
    worker.once('message', (answers: Answer[]) => resolve(answers));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the paced worker exited with ${code}`)));
  });
}
