import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { headingAnchors } from '../../support/markdown.ts';
import { alertRules, obj, operatorRuleGroups, plainRuleGroups, prometheusRulesFile, ROOT } from '../../support/deploy-manifests.ts';
import { checkExpression, knownMetrics } from '../../support/deploy-metrics.ts';

/*
 * The alert rules (deploy/prometheus/gatehouse-rules.yml and the PrometheusRule) against the
 * Metrics registry and docs/runbooks.md. (promtool's check of their PromQL runs a process:
 * test/integration/promtool.test.ts.) against the code, so they cannot drift (the other manifests: the files beside this one).
 */

/** What every runbook_url starts with, as shipped; docs/monitoring.md says how to replace it. */
const RUNBOOK_BASE = 'https://gatehouse.example';

describe('deploy manifests', () => {
  describe('alerts and dashboard use metrics that exist', () => {
    it('PrometheusRule: every expression, and the required alerts', async () => {
      const known = await knownMetrics();
      for (const rule of alertRules) {
        const name = String(rule['alert'] ?? rule['record']);
        checkExpression(known, name, String(rule['expr']));
        if (rule['alert'] !== undefined) {
          expect(['critical', 'warning', 'info'], name).toContain(obj(rule['labels'], name)['severity']);
          expect(obj(rule['annotations'], name)['summary'], name).toBeTypeOf('string');
        }
      }
      const expressions = alertRules.map((rule) => String(rule['expr']));
      const required: ReadonlyArray<[what: string, test: RegExp]> = [
        ['deny-rate spike', /gatehouse_decisions_total\{[^}]*outcome="deny"/],
        ['fail-open > 0', /gatehouse_fail_open_decisions_total\b.*>\s*0/s],
        ['revocation barrier misses', /gatehouse_revocation_barrier_missed_replicas_total/],
        ['store down', /gatehouse_dependency_up\{[^}]*dependency="store"/],
        ['Redis down', /gatehouse_dependency_up\{[^}]*dependency="redis"/],
        ['a gateway down', /^up\{job="gatehouse"\} == 0$/],
        ['no gateway at all', /^absent\(up\{job="gatehouse"\}\)$/],
      ];
      for (const [what, test] of required) expect(expressions.some((expr) => test.test(expr)), what).toBe(true);
    });

    it('the PrometheusRule renders exactly the groups of deploy/prometheus/gatehouse-rules.yml', () => {
      expect(plainRuleGroups.length).toBeGreaterThan(0);
      expect(operatorRuleGroups).toHaveLength(1);
      for (const { file, groups } of operatorRuleGroups) {
        expect(groups, `${file}: copy the groups of ${relative(ROOT, prometheusRulesFile)}`).toEqual(plainRuleGroups);
      }
    });

    it('every alert has an absolute https runbook_url to its section of docs/runbooks.md, and every runbook section is an alert', () => {
      const runbooks = readFileSync(join(ROOT, 'docs/runbooks.md'), 'utf8');
      const anchors = headingAnchors(runbooks);
      const alerts = alertRules.filter((rule) => rule['alert'] !== undefined);
      for (const rule of alerts) {
        const name = String(rule['alert']);
        const url = new URL(String(obj(rule['annotations'], name)['runbook_url']));
        expect(url.protocol, `${name}: runbook_url`).toBe('https:');
        // The placeholder host docs/monitoring.md tells the operator to replace, in front of the docs' path in the repository.
        expect(url.origin + url.pathname, `${name}: runbook_url`).toBe(`${RUNBOOK_BASE}/docs/runbooks.md`);
        expect(url.hash, `${name}: runbook_url`).toBe(`#${name.toLowerCase()}`);
        expect(anchors, `${name}: no section "## ${name}" in docs/runbooks.md`).toContain(url.hash.slice(1));
      }
      const sections = [...runbooks.matchAll(/^## (Gatehouse\w+)$/gm)].map((match) => match[1]);
      expect(sections.sort()).toEqual(alerts.map((rule) => String(rule['alert'])).sort());
    });
  });
});
