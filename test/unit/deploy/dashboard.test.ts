import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dashboardQueries, dashboards, list, obj, ROOT } from '../../support/deploy-manifests.ts';
import { checkExpression, knownMetrics, selectorsIn } from '../../support/deploy-metrics.ts';

/*
 * The Grafana dashboards under deploy/grafana against the Metrics registry: every query on a
 * metric that exists, every metric on a panel against the code, so they cannot drift (the other manifests: the files beside this one).
 */

describe('deploy manifests', () => {
  describe('alerts and dashboard use metrics that exist', () => {
    it.each(dashboards.map(({ file, json }) => [relative(ROOT, file), json] as const))('%s', async (file, json) => {
      const dashboard = obj(json, file);
      expect(dashboard['uid']).toBeTypeOf('string');
      expect(dashboard['title']).toBeTypeOf('string');
      const known = await knownMetrics();
      const panels = list(dashboard['panels']).map((panel) => obj(panel, file)).filter((panel) => panel['type'] !== 'row');
      expect(panels.length).toBeGreaterThan(10);
      for (const panel of panels) {
        const targets = list(panel['targets']);
        expect(targets.length, String(panel['title'])).toBeGreaterThan(0);
        for (const target of targets) checkExpression(known, `${file}: ${String(panel['title'])}`, String(obj(target, file)['expr']));
      }
      const queries = dashboardQueries(json);
      for (const query of queries) {
        for (const { name } of selectorsIn(query)) {
          expect(known.has(name) || known.has(name.replace(/_(bucket|sum|count)$/, '')), `${file}: ${name}`).toBe(true);
        }
      }
      // Every family the gateway exports has a panel.
      const used = new Set(queries.flatMap((query) => selectorsIn(query).map(({ name }) => name.replace(/_(bucket|sum|count)$/, ''))));
      for (const name of known.keys()) {
        if (name.startsWith('gatehouse_process_') || name.startsWith('gatehouse_nodejs_')) continue;
        expect(used, `${file}: no panel for ${name}`).toContain(name);
      }
    });
  });
});
