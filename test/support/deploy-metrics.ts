import { expect } from 'vitest';
import { Metrics } from '../../src/ops/metrics.ts';

/*
 * The metric names and labels the gateway exports, and the PromQL of deploy/'s alerts and
 * dashboard checked against them (test/unit/deploy/alert-rules.test.ts, dashboard.test.ts).
 */

/** Labels Prometheus attaches to every scraped series. */
const TARGET_LABELS = new Set(['instance', 'job', 'namespace', 'pod', 'service', 'container', 'endpoint']);

export async function knownMetrics(): Promise<Map<string, { type: string; labels: Set<string> }>> {
  const metrics = new Metrics({ routes: ['events'] });
  // One of everything, so that every family shows its label names.
  metrics.decision('allow', 'allowed', 'api_key', 'events', 0.001);
  metrics.upstream('events', 200, 0.01);
  metrics.cacheLookup('identity', 'hit');
  metrics.argon2Verify('match');
  metrics.throttled('login');
  metrics.revocationBarrier(0.01, 1);
  metrics.setKeysByStatus({ active: 1, disabled: 0, expired: 0, revoked: 0 });
  metrics.login('success');
  metrics.setDependencyUp('store', true);
  const known = new Map<string, { type: string; labels: Set<string> }>();
  for (const family of await metrics.registry.getMetricsAsJSON()) {
    const labels = new Set(family.values.flatMap((sample) => Object.keys(sample.labels)));
    known.set(family.name, { type: String(family.type), labels });
  }
  return known;
}

interface Selector {
  name: string;
  labels: string[];
}

/** Prometheus's own series of every target (1 when the scrape succeeded): only target labels. */
const SCRAPE_SERIES = 'up';

/** `gatehouse_*` metric names (and `up{…}`) in a PromQL expression, with the label names of their `{…}` selectors. */
export function selectorsIn(expr: string): Selector[] {
  return [...expr.matchAll(/\b(gatehouse_[a-z0-9_]+|up(?=\{))(\{([^}]*)\})?/g)].map((match) => ({
    name: match[1] as string,
    labels: [...(match[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/g)].map((label) => label[1] as string),
  }));
}

export function checkExpression(known: Awaited<ReturnType<typeof knownMetrics>>, where: string, expr: string): void {
  const selectors = selectorsIn(expr);
  expect(selectors.length, `${where}: references no gatehouse_ metric: ${expr}`).toBeGreaterThan(0);
  for (const { name, labels } of selectors) {
    if (name === SCRAPE_SERIES) {
      for (const label of labels) expect(TARGET_LABELS.has(label), `${where}: up has no label ${label}`).toBe(true);
      continue;
    }
    const base = known.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    const family = known.get(base);
    expect(family, `${where}: unknown metric ${name}`).toBeDefined();
    if (base !== name) expect(family?.type, `${where}: ${name} on a ${family?.type ?? '?'}`).toBe('histogram');
    for (const label of labels) {
      const allowed = family?.labels.has(label) === true || TARGET_LABELS.has(label) || (label === 'le' && name.endsWith('_bucket'));
      expect(allowed, `${where}: ${name} has no label ${label}`).toBe(true);
    }
  }
}
