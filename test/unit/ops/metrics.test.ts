import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../../src/errors/gateway-error.ts';
import type { ErrorCode } from '../../../src/errors/gateway-error.ts';
import { Metrics, OTHER } from '../../../src/ops/metrics.ts';
import type { CredentialKind, DecisionReason } from '../../../src/ops/metrics.ts';
import { ROUTES, recordTraffic } from '../../support/metrics-traffic.ts';

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

async function family(metrics: Metrics, name: string): Promise<{ type: string; values: Sample[] }> {
  const json = await metrics.registry.getMetricsAsJSON();
  const found = json.find((entry) => entry.name === name);
  if (found === undefined) throw new Error(`no metric family ${name}`);
  return { type: String(found.type), values: found.values as Sample[] };
}

function labelValues(values: Sample[], label: string): Set<string> {
  return new Set(values.map((sample) => String(sample.labels[label])));
}

describe('Metrics', () => {
  it('exposes every gateway family with its type, in base units, under gatehouse_', async () => {
    const metrics = new Metrics({ routes: ROUTES });
    recordTraffic(metrics);
    const expected: ReadonlyArray<[name: string, type: string, labels: string[]]> = [
      ['gatehouse_decisions_total', 'counter', ['outcome', 'reason', 'credential', 'route']],
      ['gatehouse_decision_duration_seconds', 'histogram', ['outcome', 'credential', 'route']],
      ['gatehouse_upstream_duration_seconds', 'histogram', ['route', 'status_class']],
      ['gatehouse_cache_lookups_total', 'counter', ['tier', 'result']],
      ['gatehouse_argon2_verifications_total', 'counter', ['result']],
      ['gatehouse_throttled_total', 'counter', ['kind']],
      ['gatehouse_revocation_barrier_duration_seconds', 'histogram', []],
      ['gatehouse_revocation_barrier_missed_replicas_total', 'counter', []],
      ['gatehouse_api_keys', 'gauge', ['status']],
      ['gatehouse_logins_total', 'counter', ['result']],
      ['gatehouse_fail_open_decisions_total', 'counter', []],
      ['gatehouse_dependency_up', 'gauge', ['dependency']],
      ['gatehouse_build_info', 'gauge', ['version']],
    ];
    for (const [name, type, labels] of expected) {
      const found = await family(metrics, name);
      expect(found.type, name).toBe(type);
      for (const sample of found.values) {
        const names = Object.keys(sample.labels).filter((label) => label !== 'le');
        expect(names.sort(), name).toEqual([...labels].sort());
      }
    }
    const names = (await metrics.registry.getMetricsAsJSON()).map((entry) => entry.name);
    for (const name of names) expect(name).toMatch(/^gatehouse_[a-z0-9_]+$/);
    expect(names.filter((name) => /milli|micro|_ms$/.test(name))).toEqual([]);
  });

  it('records values under the expected label sets', async () => {
    const metrics = new Metrics({ routes: ROUTES });
    recordTraffic(metrics);
    const decisions = await family(metrics, 'gatehouse_decisions_total');
    expect(decisions.values).toContainEqual({
      labels: { outcome: 'allow', reason: 'allowed', credential: 'api_key', route: 'events' },
      value: 2,
    });
    expect(decisions.values).toContainEqual({
      labels: { outcome: 'deny', reason: 'insufficient_scope', credential: 'api_key', route: 'mcp' },
      value: 1,
    });
    const count = (await family(metrics, 'gatehouse_decision_duration_seconds')).values.find(
      (sample) => sample.metricName === 'gatehouse_decision_duration_seconds_count' && sample.labels['route'] === 'events',
    );
    expect(count?.value).toBe(2);
    const upstream = (await family(metrics, 'gatehouse_upstream_duration_seconds')).values;
    expect(labelValues(upstream, 'status_class')).toEqual(new Set(['2xx', 'timeout']));
    expect((await family(metrics, 'gatehouse_cache_lookups_total')).values).toContainEqual({
      labels: { tier: 'identity', result: 'miss' },
      value: 1,
    });
    expect((await family(metrics, 'gatehouse_revocation_barrier_missed_replicas_total')).values[0]?.value).toBe(1);
    expect((await family(metrics, 'gatehouse_api_keys')).values).toContainEqual({ labels: { status: 'revoked' }, value: 2 });
    expect((await family(metrics, 'gatehouse_dependency_up')).values).toContainEqual({ labels: { dependency: 'redis' }, value: 0 });
    expect(labelValues((await family(metrics, 'gatehouse_logins_total')).values, 'result')).toEqual(
      new Set(['success', 'failure', 'throttled']),
    );
  });

  it('shows both rate limits and the fallback at 0 before anything happened, then counts them', async () => {
    const metrics = new Metrics({ processMetrics: false });
    expect((await metrics.scrape()).body).toMatch(/^gatehouse_rate_limited_total\{limit="key"\} 0\ngatehouse_rate_limited_total\{limit="tool"\} 0$/m);
    expect((await metrics.scrape()).body).toMatch(/^gatehouse_rate_limit_fallback_total 0$/m);
    metrics.rateLimited('key');
    metrics.rateLimited('tool');
    metrics.rateLimited('tool');
    metrics.rateLimited('place_outbound_call' as 'tool');
    metrics.rateLimitFallback();
    expect((await family(metrics, 'gatehouse_rate_limited_total')).values.map(({ labels, value }) => [labels.limit, value])).toEqual([['key', 1], ['tool', 2], [OTHER, 1]]);
    expect((await family(metrics, 'gatehouse_rate_limit_fallback_total')).values.map(({ value }) => value)).toEqual([1]);
  });

  it('shows the fail-open counter at 0 before anything happened', async () => {
    const { body } = await new Metrics().scrape();
    expect(body).toMatch(/^gatehouse_fail_open_decisions_total 0$/m);
  });

  describe('label values come from fixed sets only', () => {
    const cases: ReadonlyArray<{ description: string; route: string; expected: string }> = [
      { description: 'a route-table name is kept', route: 'events', expected: 'events' },
      { description: "the gateway's own endpoints are kept", route: 'login', expected: 'login' },
      { description: 'a raw path becomes other', route: '/api/v1/agents/7/events', expected: OTHER },
      { description: 'an unknown name becomes other', route: 'dashboard_assets', expected: OTHER },
      { description: 'an email becomes other', route: 'alice@example.com', expected: OTHER },
      { description: 'the empty string becomes other', route: '', expected: OTHER },
    ];
    for (const { description, route, expected } of cases) {
      it(description, async () => {
        const metrics = new Metrics({ routes: ROUTES });
        metrics.decision('deny', 'invalid_credential', 'api_key', route, 0.0001);
        metrics.upstream(route, 200, 0.01);
        expect(labelValues((await family(metrics, 'gatehouse_decisions_total')).values, 'route')).toEqual(new Set([expected]));
        expect(labelValues((await family(metrics, 'gatehouse_upstream_duration_seconds')).values, 'route')).toEqual(
          new Set([expected]),
        );
      });
    }

    it('keeps cardinality bounded whatever callers pass', async () => {
      const metrics = new Metrics({ routes: ROUTES });
      for (let i = 0; i < 500; i += 1) {
        const junk = `gh_${i.toString(36)}_key_${i}`;
        metrics.decision('deny', junk as DecisionReason, junk as CredentialKind, `/path/${i}`, 0.0001);
        metrics.cacheLookup(junk as 'identity', junk as 'hit');
        metrics.argon2Verify(junk as 'match');
        metrics.throttled(junk as 'login');
        metrics.login(junk as 'success');
        metrics.setDependencyUp(junk as 'store', true);
      }
      expect((await family(metrics, 'gatehouse_decisions_total')).values).toEqual([
        { labels: { outcome: 'deny', reason: OTHER, credential: OTHER, route: OTHER }, value: 500 },
      ]);
      expect((await family(metrics, 'gatehouse_cache_lookups_total')).values).toEqual([
        { labels: { tier: OTHER, result: OTHER }, value: 500 },
      ]);
      expect((await family(metrics, 'gatehouse_argon2_verifications_total')).values).toHaveLength(1);
      expect((await family(metrics, 'gatehouse_throttled_total')).values).toHaveLength(1);
      expect((await family(metrics, 'gatehouse_logins_total')).values).toHaveLength(1);
      expect((await family(metrics, 'gatehouse_dependency_up')).values).toEqual([]);
    });

    it('uses only error codes or allowed as reasons', async () => {
      const metrics = new Metrics({ routes: ROUTES });
      for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) metrics.decision('deny', code, 'api_key', 'mcp', 0.0001);
      metrics.decision('allow', 'allowed', 'api_key', 'mcp', 0.0001);
      const reasons = labelValues((await family(metrics, 'gatehouse_decisions_total')).values, 'reason');
      expect(reasons).toEqual(new Set([...Object.keys(ERROR_CODES), 'allowed']));
    });

    it('ignores route names that could not be route-table names', async () => {
      const metrics = new Metrics({ routes: ['Bad Name', '/raw/path', 'events'] });
      metrics.decision('allow', 'allowed', 'api_key', 'Bad Name', 0.0001);
      metrics.decision('allow', 'allowed', 'api_key', '/raw/path', 0.0001);
      expect(labelValues((await family(metrics, 'gatehouse_decisions_total')).values, 'route')).toEqual(new Set([OTHER]));
    });
  });

  describe('upstream status classes', () => {
    const cases: ReadonlyArray<{ status: number | 'error' | 'timeout'; expected: string }> = [
      { status: 101, expected: '1xx' },
      { status: 204, expected: '2xx' },
      { status: 304, expected: '3xx' },
      { status: 404, expected: '4xx' },
      { status: 503, expected: '5xx' },
      { status: 'error', expected: 'error' },
      { status: 'timeout', expected: 'timeout' },
      { status: 0, expected: OTHER },
      { status: 999, expected: OTHER },
      { status: Number.NaN, expected: OTHER },
    ];
    for (const { status, expected } of cases) {
      it(`${String(status)} is ${expected}`, async () => {
        const metrics = new Metrics({ routes: ROUTES });
        metrics.upstream('mcp', status, 0.02);
        const values = (await family(metrics, 'gatehouse_upstream_duration_seconds')).values;
        expect(labelValues(values, 'status_class')).toEqual(new Set([expected]));
      });
    }
  });

  it('keeps each instance on its own registry', async () => {
    const first = new Metrics({ routes: ROUTES });
    const second = new Metrics({ routes: ROUTES });
    first.login('success');
    expect((await family(first, 'gatehouse_logins_total')).values).toHaveLength(1);
    expect((await family(second, 'gatehouse_logins_total')).values).toHaveLength(0);
  });

  it('includes process and event-loop metrics, and can leave them out', async () => {
    const names = (await new Metrics().registry.getMetricsAsJSON()).map((entry) => entry.name);
    expect(names).toContain('gatehouse_process_cpu_seconds_total');
    expect(names).toContain('gatehouse_process_resident_memory_bytes');
    expect(names).toContain('gatehouse_nodejs_eventloop_lag_seconds');
    expect(names).toContain('gatehouse_nodejs_eventloop_lag_p99_seconds');
    const bare = (await new Metrics({ processMetrics: false }).registry.getMetricsAsJSON()).map((entry) => entry.name);
    expect(bare.filter((name) => name.startsWith('gatehouse_process_') || name.startsWith('gatehouse_nodejs_'))).toEqual([]);
  });

  it('reads key counts at scrape time through a key counter, keeping the last values on failure', async () => {
    const metrics = new Metrics();
    let fail = false;
    metrics.setKeyCounter(async () => {
      if (fail) throw new Error('store down');
      return { active: 7, disabled: 0, expired: 0, revoked: 3 };
    });
    expect((await metrics.scrape()).body).toMatch(/^gatehouse_api_keys\{status="active"\} 7$/m);
    fail = true;
    const { body } = await metrics.scrape();
    expect(body).toMatch(/^gatehouse_api_keys\{status="revoked"\} 3$/m);
  });

  it('scrapes as the Prometheus text format', async () => {
    const metrics = new Metrics({ routes: ROUTES });
    recordTraffic(metrics);
    const { contentType, body } = await metrics.scrape();
    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(body).toContain('# TYPE gatehouse_decisions_total counter');
    expect(body).toMatch(/^gatehouse_decision_duration_seconds_bucket\{le="0\.00001",outcome="allow",credential="api_key",route="events"\} 0$/m);
    expect(body).toMatch(/^gatehouse_upstream_duration_seconds_bucket\{le="30",route="mcp",status_class="timeout"\} 1$/m);
  });
});
