import type { KeyVerifierStats } from '../verify/key-verifier.ts';
import type { Metrics } from './metrics.ts';

/**
 * The verifier counts in plain numbers on the request path; at each scrape the growth since
 * the last one is added to the Prometheus counters.
 */
export function exportVerifierStats(metrics: Metrics, stats: () => KeyVerifierStats): void {
  let last = stats();
  metrics.onScrape(() => {
    const now = stats();
    const grew = (field: keyof KeyVerifierStats) => now[field] - last[field];
    metrics.cacheLookup('identity', 'hit', grew('identityHits'));
    metrics.cacheLookup('identity', 'miss', grew('identityMisses'));
    metrics.cacheLookup('state', 'hit', grew('stateHits'));
    metrics.cacheLookup('state', 'miss', grew('stateMisses'));
    metrics.cacheLookup('redis', 'hit', grew('sharedHits'));
    metrics.cacheLookup('redis', 'miss', grew('sharedMisses') + grew('sharedErrors'));
    metrics.argon2Verify('match', grew('argon2Verifies') - grew('argon2Mismatches'));
    metrics.argon2Verify('mismatch', grew('argon2Mismatches'));
    metrics.throttled('key_prefix', grew('throttled'));
    last = now;
  });
}
