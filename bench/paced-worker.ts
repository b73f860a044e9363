/**
 * Runs one paced stream (bench/paced.ts) in a worker thread, so a second stream's client work
 * does not delay the timing of the first: each has an event loop of its own.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Exchange } from './client.ts';
import { paced } from './paced.ts';

export interface PacedWorkerData {
  origin: string;
  /** Sent in turn, one per request. */
  exchanges: Exchange[];
  rate: number;
  seconds: number;
  connections: number;
  /** Sent first at the same pace, and not returned (bench/paced.ts). */
  warmupSeconds?: number;
}

const data = workerData as PacedWorkerData;
const answers = await paced(data.origin, (index) => data.exchanges[index % data.exchanges.length]!, data.rate, data.seconds, data.connections, data.warmupSeconds);
parentPort!.postMessage(answers);
