import { Pool } from 'undici';

/** One answer as the benchmark's own client saw it. */
export interface Answer {
  status: number;
  /** The problem+json `code` of a refusal, if any. */
  code: string | undefined;
  ms: number;
}

export interface Exchange {
  path: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** A small HTTP client for probes, warm-ups and the cold-key storm (not for throughput: that is wrk's or autocannon's job). */
export class Client {
  readonly #pool: Pool;

  constructor(origin: string, connections = 128) {
    this.#pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 30_000 });
  }

  async send(exchange: Exchange): Promise<Answer> {
    const started = performance.now();
    const response = await this.#pool.request({
      path: exchange.path,
      method: exchange.method as 'POST',
      headers: exchange.headers,
      body: exchange.body ?? null,
    });
    const text = await response.body.text();
    const ms = performance.now() - started;
    let code: string | undefined;
    if (response.statusCode >= 300 && text.startsWith('{')) {
      try {
        code = (JSON.parse(text) as { code?: string }).code;
      } catch {
        code = undefined;
      }
    }
    return { status: response.statusCode, code, ms };
  }

  /** Sends every exchange, at most `inFlight` at once; answers in order. */
  async sendAll(exchanges: readonly Exchange[], inFlight: number): Promise<Answer[]> {
    const answers: Answer[] = new Array(exchanges.length);
    let next = 0;
    const worker = async () => {
      for (let index = next++; index < exchanges.length; index = next++) answers[index] = await this.send(exchanges[index]!);
    };
    await Promise.all(Array.from({ length: Math.min(inFlight, exchanges.length) }, worker));
    return answers;
  }

  close(): Promise<void> {
    return this.#pool.close();
  }
}

/** Status counts, e.g. `{ "200": 99, "401 invalid_credential": 1 }`. */
export function tally(answers: readonly Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { status, code } of answers) {
    const label = code === undefined ? String(status) : `${status} ${code}`;
    counts[label] = (counts[label] ?? 0) + 1;
  }
  return counts;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}
