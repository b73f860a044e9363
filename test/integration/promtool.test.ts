import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/ops/metrics.ts';
import { alertRules, dashboardQueries, dashboards, prometheusRulesFile } from '../support/deploy-manifests.ts';
import { recordTraffic, ROUTES } from '../support/metrics-traffic.ts';

/*
 * Prometheus's own checker on what Gatehouse hands Prometheus: the scrape, and the PromQL of the
 * alerts and dashboards under deploy/ (whose metric names test/unit/deploy/alert-rules.test.ts
 * checks against the registry). promtool is a process, so this is not a unit test.
 */

const available = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).error === undefined;
const NOTICE = 'promtool not found: install Debian package "prometheus" (apt-get install -y --no-install-recommends prometheus)';

/** Runs `promtool check rules` on recording rules made of the expressions: PromQL syntax. */
function promtoolCheckExpressions(expressions: string[]): void {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-promql-'));
  try {
    const file = join(dir, 'rules.yaml');
    const rules = expressions.map((expr, index) => ({ record: `gatehouse_check:expr_${index}`, expr }));
    writeFileSync(file, stringify({ groups: [{ name: 'check', rules }] }));
    const result = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
    expect(result.status, `${result.stdout}${result.stderr}`).toBe(0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('promtool', () => {
  if (!available) {
    if (process.env['REQUIRE_SERVICES'] === '1') {
      it('needs promtool (REQUIRE_SERVICES=1)', () => {
        throw new Error(NOTICE);
      });
    } else {
      console.warn(`\n*** SKIPPED promtool checks of the metrics scrape and of the alert and dashboard PromQL: ${NOTICE} ***\n`);
    }
  }

  it.skipIf(!available)('check metrics accepts the scrape after traffic', async () => {
    const metrics = new Metrics({ routes: ROUTES });
    recordTraffic(metrics);
    metrics.decision('deny', 'invalid_credential', 'none', '/unlisted', 0.5);
    const { body } = await metrics.scrape();
    const result = spawnSync('promtool', ['check', 'metrics'], { input: body, encoding: 'utf8' });
    expect(`${result.stdout}${result.stderr}`.trim()).toBe('');
    expect(result.status).toBe(0);
  });

  it.skipIf(!available)('check rules accepts deploy/prometheus/gatehouse-rules.yml as Prometheus loads it', () => {
    const result = spawnSync('promtool', ['check', 'rules', prometheusRulesFile], { encoding: 'utf8' });
    expect(result.status, `${result.stdout}${result.stderr}`).toBe(0);
    expect(result.stdout).toMatch(/SUCCESS: \d+ rules found/);
  });

  it.skipIf(!available)('check rules accepts every alert and dashboard expression (syntax)', () => {
    const dashboardExpressions = dashboards
      .flatMap(({ json }) => dashboardQueries(json))
      .filter((query) => !query.startsWith('label_values('))
      .map((query) => query.replaceAll('$__rate_interval', '5m').replaceAll('$instance', '.*'));
    promtoolCheckExpressions([...alertRules.map((rule) => String(rule['expr'])), ...dashboardExpressions]);
  });
});
