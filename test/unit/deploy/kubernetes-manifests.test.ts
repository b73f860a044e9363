import { dirname, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, SECRET_VARIABLES } from '../../../src/config/env.ts';
import { dashboardFiles, DEPLOY, kubeDocs, list, obj, yamlFiles } from '../../support/deploy-manifests.ts';
import { DRAIN_SECONDS, ENV_NAMES, gatewayPorts, matches, PLATFORM_ENV_NAMES, podTemplates, preStopSeconds, resolvePort } from '../../support/deploy-workloads.ts';

/*
 * The Kubernetes manifests under deploy/kubernetes (env names against the config schema, ports
 * and probe paths against PORT / OPS_PORT, selectors against the pod templates) against the code, so they cannot drift (the other manifests: the files beside this one).
 */

describe('deploy manifests', () => {
  const templates = podTemplates();
  const gateways = templates.flatMap((template) => template.containers.filter((container) => container.kind === 'gateway'));

  it('parse, and include the expected files', () => {
    const files = yamlFiles.map((file) => relative(DEPLOY, file));
    expect(files).toEqual(
      expect.arrayContaining([
        'docker-compose.yml',
        'kubernetes/standalone/deployment.yaml',
        'kubernetes/standalone/service.yaml',
        'kubernetes/standalone/pdb.yaml',
        'kubernetes/sidecar/deployment.yaml',
        'kubernetes/monitoring/servicemonitor.yaml',
        'kubernetes/monitoring/prometheusrule.yaml',
        'prometheus/gatehouse-rules.yml',
      ]),
    );
    expect(dashboardFiles.map((file) => relative(DEPLOY, file))).toContain('grafana/gatehouse-dashboard.json');
    for (const { file, doc } of kubeDocs) {
      expect(doc['apiVersion'], file).toBeTypeOf('string');
      expect(doc['kind'], file).toBeTypeOf('string');
      expect(obj(doc['metadata'], file)['name'], file).toBeTypeOf('string');
    }
    expect(gateways.length).toBeGreaterThanOrEqual(2);
  });

  describe('gateway containers', () => {
    it.each(gateways.map((container) => [container.workload, container] as const))('%s: env names are config variables', (_name, container) => {
      expect(container.spec['envFrom'], 'envFrom hides names from this check').toBeUndefined();
      for (const name of container.env.keys()) expect(ENV_NAMES, `${container.workload}: ${name}`).toContain(name);
    });

    it.each(gateways.map((container) => [container.workload, container] as const))('%s: secrets come from a Secret', (_name, container) => {
      for (const entry of list(container.spec['env'])) {
        const variable = obj(entry, container.workload);
        if (!(SECRET_VARIABLES as readonly string[]).includes(String(variable['name']))) continue;
        expect(variable['value'], `${String(variable['name'])} inline`).toBeUndefined();
        const from = obj(variable['valueFrom'], String(variable['name']));
        expect(obj(from['secretKeyRef'], String(variable['name']))['name']).toBeTypeOf('string');
      }
      for (const name of ['DATABASE_URL', 'JWT_SECRET', 'ADMIN_PASSWORD']) expect([...container.env.keys()]).toContain(name);
    });

    it.each(gateways.map((container) => [container.workload, container] as const))('%s: ports and probes agree with PORT / OPS_PORT', (_name, container) => {
      const { port, ops } = gatewayPorts(container.env);
      const declared = list(container.spec['ports']).map((entry) => Number(obj(entry, 'ports')['containerPort']));
      expect(declared.sort()).toEqual([port, ops].sort());
      const probes: ReadonlyArray<[field: string, path: string, required: boolean]> = [
        ['livenessProbe', '/healthz', true],
        ['readinessProbe', '/readyz', true],
        ['startupProbe', '/healthz', false],
      ];
      for (const [field, path, required] of probes) {
        const probe = container.spec[field];
        if (!required && probe === undefined) continue;
        const httpGet = obj(obj(probe, field)['httpGet'], field);
        expect(httpGet['path'], field).toBe(path);
        expect(resolvePort(container.spec, httpGet['port']), `${field} on the ops port`).toBe(ops);
      }
    });
  });

  it('grace periods cover every preStop plus the gateway drain', () => {
    expect(DRAIN_SECONDS).toBeGreaterThan(0);
    for (const template of templates) {
      if (!template.containers.some((container) => container.kind === 'gateway')) continue;
      const preStops = template.containers.map((container) => preStopSeconds(container.spec));
      const gateway = template.containers.find((container) => container.kind === 'gateway');
      expect(gateway && preStopSeconds(gateway.spec), `${template.workload}: gateway preStop`).toBeGreaterThanOrEqual(3);
      const grace = Number(template.spec['terminationGracePeriodSeconds']);
      const needed = preStops.reduce((sum, seconds) => sum + seconds, 0) + DRAIN_SECONDS;
      expect(grace, `${template.workload}: grace ${grace} < preStop + drain ${needed}`).toBeGreaterThanOrEqual(needed);
    }
  });

  it('the sidecar runs as a native sidecar in front of a loopback-only platform', () => {
    const sidecar = templates.find((template) => template.file.includes('sidecar'));
    if (sidecar === undefined) throw new Error('no sidecar workload');
    const gateway = sidecar.containers.find((container) => container.kind === 'gateway');
    const platform = sidecar.containers.find((container) => container.kind === 'platform');
    if (gateway === undefined || platform === undefined) throw new Error('sidecar pod needs the gateway and the platform');
    expect(gateway.init).toBe(true);
    expect(gateway.spec['restartPolicy']).toBe('Always');
    expect(platform.init).toBe(false);
    for (const name of platform.env.keys()) expect(PLATFORM_ENV_NAMES, `platform env ${name}`).toContain(name);
    expect(platform.env.get('HOST')).toBe('127.0.0.1');
    const platformPort = Number(platform.env.get('PORT') ?? 3000);
    expect(platform.spec['ports'], 'the platform publishes no port').toBeUndefined();
    const upstream = new URL(gateway.env.get('UPSTREAM_URL') ?? DEFAULTS.UPSTREAM_URL);
    expect(upstream.hostname).toBe('127.0.0.1');
    expect(Number(upstream.port)).toBe(platformPort);
  });

  it('Services target a gateway port, public traffic PORT and ops traffic OPS_PORT', () => {
    const services = kubeDocs.filter(({ doc }) => doc['kind'] === 'Service');
    expect(services.length).toBeGreaterThan(0);
    for (const { file, doc } of services) {
      const name = String(obj(doc['metadata'], file)['name']);
      const isOps = obj(obj(doc['metadata'], file)['labels'], name)['app.kubernetes.io/component'] === 'ops';
      const selector = obj(obj(doc['spec'], name)['selector'], name);
      const selected = templates.filter((template) => dirname(template.file) === dirname(file) && matches(selector, template.labels));
      expect(selected.length, `${file} Service/${name} selects no pod template in its folder`).toBeGreaterThan(0);
      for (const entry of list(obj(doc['spec'], name)['ports'])) {
        const port = obj(entry, name);
        for (const template of selected) {
          const gateway = template.containers.find((container) => container.kind === 'gateway');
          if (gateway === undefined) throw new Error(`Service/${name} selects pods without a gateway`);
          const { port: publicPort, ops } = gatewayPorts(gateway.env);
          expect(resolvePort(gateway.spec, port['targetPort'] ?? port['port']), `Service/${name}`).toBe(isOps ? ops : publicPort);
        }
      }
    }
  });

  it('the PodDisruptionBudget selects the standalone gateways', () => {
    const pdbs = kubeDocs.filter(({ doc }) => doc['kind'] === 'PodDisruptionBudget');
    expect(pdbs).toHaveLength(1);
    for (const { file, doc } of pdbs) {
      const selector = obj(obj(obj(doc['spec'], file)['selector'], file)['matchLabels'], file);
      const selected = templates.filter((template) => matches(selector, template.labels));
      expect(selected.map((template) => template.workload)).toEqual([expect.stringContaining('standalone')]);
    }
  });

  it('the ServiceMonitor scrapes /metrics on the ops Services', () => {
    const monitors = kubeDocs.filter(({ doc }) => doc['kind'] === 'ServiceMonitor');
    expect(monitors).toHaveLength(1);
    for (const { file, doc } of monitors) {
      const spec = obj(doc['spec'], file);
      const selector = obj(obj(spec['selector'], file)['matchLabels'], file);
      const services = kubeDocs.filter(
        (entry) => entry.doc['kind'] === 'Service' && matches(selector, obj(obj(entry.doc['metadata'], file)['labels'], file)),
      );
      expect(services.length).toBeGreaterThanOrEqual(2);
      // The job every scraped series carries is this label's value: the one GatehouseDown and GatehouseAbsent select.
      const jobLabel = String(spec['jobLabel']);
      for (const service of services) expect(obj(obj(service.doc['metadata'], file)['labels'], file)[jobLabel], `${service.file}: job`).toBe('gatehouse');
      for (const endpoint of list(spec['endpoints'])) {
        const { port, path } = obj(endpoint, file);
        expect(path).toBe('/metrics');
        for (const service of services) {
          const names = list(obj(service.doc['spec'], file)['ports']).map((entry) => obj(entry, file)['name']);
          expect(names, `${service.file}: no port ${String(port)}`).toContain(port);
        }
      }
    }
  });
});
