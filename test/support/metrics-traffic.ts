import type { Metrics } from '../../src/ops/metrics.ts';

/** The routes the test registries are built with. */
export const ROUTES = ['events', 'mcp', 'admin'];

/** Records one of everything, as a gateway would after some traffic. */
export function recordTraffic(metrics: Metrics): void {
  metrics.decision('allow', 'allowed', 'api_key', 'events', 0.00004);
  metrics.decision('allow', 'allowed', 'api_key', 'events', 0.00006);
  metrics.decision('deny', 'insufficient_scope', 'api_key', 'mcp', 0.0001);
  metrics.decision('deny', 'missing_credential', 'none', 'admin', 0.00002);
  metrics.decision('allow', 'allowed', 'admin', 'api_keys', 0.0003);
  metrics.upstream('events', 204, 0.012);
  metrics.upstream('mcp', 'timeout', 30);
  metrics.cacheLookup('identity', 'hit');
  metrics.cacheLookup('identity', 'miss');
  metrics.cacheLookup('redis', 'hit');
  metrics.argon2Verify('match');
  metrics.argon2Verify('mismatch');
  metrics.throttled('login');
  metrics.throttled('key_prefix');
  metrics.revocationBarrier(0.004, 0);
  metrics.revocationBarrier(2, 1);
  metrics.setKeysByStatus({ active: 5, disabled: 0, expired: 1, revoked: 2 });
  metrics.login('success');
  metrics.login('failure');
  metrics.login('throttled');
  metrics.setDependencyUp('store', true);
  metrics.setDependencyUp('redis', false);
}
