import type { Argon2Stats } from '../crypto/argon2.ts';
import type { Metrics } from './metrics.ts';

/** The hasher counts in plain numbers; at each scrape the growth since the last one is added to the counters. */
export function exportArgon2Stats(metrics: Metrics, stats: () => Argon2Stats): void {
  let last = stats();
  metrics.onScrape(() => {
    const now = stats();
    metrics.argon2LoginVerify(now.loginVerifies - last.loginVerifies);
    metrics.throttled('login_queue', now.loginRefusals - last.loginRefusals);
    last = now;
  });
}
