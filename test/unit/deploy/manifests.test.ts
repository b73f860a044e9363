import { readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS, SECRET_VARIABLES, envSchema } from '../../../src/config/env.ts';
import { Metrics } from '../../../src/ops/metrics.ts';
import { npmStart } from '../../../bench/npm-start.ts';
import { headingAnchors } from '../../support/markdown.ts';
import {
  alertRules,
  compose,
  dashboardFiles,
  dashboardQueries,
  dashboards,
  DEPLOY,
  isObj,
  kubeDocs,
  list,
  obj,
  operatorRuleGroups,
  plainRuleGroups,
  prometheusRulesFile,
  ROOT,
  str,
  yamlFiles,
  type Json,
  type Obj,
} from '../../support/deploy-manifests.ts';

/*
 * Every manifest under deploy/ (and the Dockerfile) against the code: env names against the
 * config schema, ports and probe paths against PORT / OPS_PORT, metric names in alerts and
 * the dashboard against the Metrics registry. So they cannot drift. (promtool's check of their
 * PromQL runs a process: test/integration/promtool.test.ts.)
 */

const ENV_NAMES = new Set(Object.keys(envSchema.shape));
/** What the example platform reads (`env['NAME']` in its main.ts). */
const PLATFORM_ENV_NAMES = new Set(
  [...readFileSync(join(ROOT, 'examples/platform/main.ts'), 'utf8').matchAll(/env\['([A-Z_]+)'\]/g)].map((match) => match[1] as string),
);
/** The gateway's drain bound on SIGTERM, read from main.ts so a change there is noticed here. */
const DRAIN_SECONDS = (() => {
  const match = /SHUTDOWN_GRACE_MS\s*=\s*([\d_]+)/.exec(readFileSync(join(ROOT, 'src/main.ts'), 'utf8'));
  if (match?.[1] === undefined) throw new Error('SHUTDOWN_GRACE_MS not found in src/main.ts');
  return Number(match[1].replaceAll('_', '')) / 1000;
})();
/** Labels Prometheus attaches to every scraped series. */
const TARGET_LABELS = new Set(['instance', 'job', 'namespace', 'pod', 'service', 'container', 'endpoint']);

// ---------------------------------------------------------------- Kubernetes helpers

interface Container {
  file: string;
  workload: string;
  kind: 'gateway' | 'platform' | 'other';
  init: boolean;
  spec: Obj;
  /** Literal env values; secret-sourced ones are absent. */
  env: Map<string, string | undefined>;
}

interface PodTemplate {
  file: string;
  workload: string;
  labels: Obj;
  spec: Obj;
  containers: Container[];
}

function containerKind(spec: Obj): Container['kind'] {
  const command = [...list(spec['command']), ...list(spec['args'])].map(String).join(' ');
  if (command.includes('examples/platform/main.ts')) return 'platform';
  return String(spec['image'] ?? '').includes('gatehouse') ? 'gateway' : 'other';
}

function podTemplates(): PodTemplate[] {
  const templates: PodTemplate[] = [];
  for (const { file, doc } of kubeDocs) {
    if (!['Deployment', 'StatefulSet', 'DaemonSet'].includes(String(doc['kind']))) continue;
    const workload = `${file} ${String(doc['kind'])}/${String(obj(doc['metadata'], file)['name'])}`;
    const template = obj(obj(doc['spec'], workload)['template'], workload);
    const spec = obj(template['spec'], workload);
    const containers: Container[] = [];
    for (const [field, init] of [['initContainers', true], ['containers', false]] as const) {
      for (const raw of list(spec[field])) {
        const container = obj(raw, workload);
        const env = new Map<string, string | undefined>();
        for (const entry of list(container['env'])) {
          const variable = obj(entry, workload);
          env.set(String(variable['name']), str(variable['value']));
        }
        containers.push({ file, workload, kind: containerKind(container), init, spec: container, env });
      }
    }
    templates.push({ file, workload, labels: obj(obj(template['metadata'], workload)['labels'], workload), spec, containers });
  }
  return templates;
}

function gatewayPorts(env: Map<string, string | undefined>): { port: number; ops: number } {
  return { port: Number(env.get('PORT') ?? DEFAULTS.PORT), ops: Number(env.get('OPS_PORT') ?? DEFAULTS.OPS_PORT) };
}

/** A port given by number or by container-port name, as a number. */
function resolvePort(container: Obj, port: Json | undefined): number | undefined {
  if (typeof port === 'number') return port;
  for (const entry of list(container['ports'])) {
    const declared = obj(entry, 'ports');
    if (declared['name'] === port) return Number(declared['containerPort']);
  }
  return undefined;
}

function matches(selector: Obj, labels: Obj): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

function preStopSeconds(container: Obj): number {
  const preStop = isObj(container['lifecycle']) ? container['lifecycle']['preStop'] : undefined;
  if (!isObj(preStop)) return 0;
  if (isObj(preStop['sleep'])) return Number(preStop['sleep']['seconds']);
  const command = isObj(preStop['exec']) ? list(preStop['exec']['command']).map(String) : [];
  if (command[0] === 'sleep' && command.length === 2) return Number(command[1]);
  throw new Error(`unrecognised preStop hook: ${JSON.stringify(preStop)}`);
}

// ---------------------------------------------------------------- metric helpers

async function knownMetrics(): Promise<Map<string, { type: string; labels: Set<string> }>> {
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
function selectorsIn(expr: string): Selector[] {
  return [...expr.matchAll(/\b(gatehouse_[a-z0-9_]+|up(?=\{))(\{([^}]*)\})?/g)].map((match) => ({
    name: match[1] as string,
    labels: [...(match[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)/g)].map((label) => label[1] as string),
  }));
}

function checkExpression(known: Awaited<ReturnType<typeof knownMetrics>>, where: string, expr: string): void {
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

// ---------------------------------------------------------------- tests

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

    it('every alert has a runbook_url into docs/runbooks.md, and every runbook section is an alert', () => {
      const runbooks = readFileSync(join(ROOT, 'docs/runbooks.md'), 'utf8');
      const anchors = headingAnchors(runbooks);
      const alerts = alertRules.filter((rule) => rule['alert'] !== undefined);
      for (const rule of alerts) {
        const name = String(rule['alert']);
        const url = obj(rule['annotations'], name)['runbook_url'];
        expect(url, `${name}: runbook_url`).toBe(`docs/runbooks.md#${name.toLowerCase()}`);
        expect(anchors, `${name}: no section "## ${name}" in docs/runbooks.md`).toContain(name.toLowerCase());
      }
      const sections = [...runbooks.matchAll(/^## (Gatehouse\w+)$/gm)].map((match) => match[1]);
      expect(sections.sort()).toEqual(alerts.map((rule) => String(rule['alert'])).sort());
    });

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

  describe('docker-compose.yml', () => {
    const services = obj(compose['services'], 'services');
    const environment = (service: Obj): Map<string, string | undefined> => {
      const env = service['environment'];
      const entries: [string, string | undefined][] = Array.isArray(env)
        ? env.map((entry) => {
            const [name = '', ...rest] = String(entry).split('=');
            return [name, rest.length > 0 ? rest.join('=') : undefined];
          })
        : Object.entries(isObj(env) ? env : {}).map(([name, value]) => [name, str(value)]);
      return new Map(entries);
    };
    const byKind = (kind: Container['kind']) =>
      Object.entries(services).filter(([, service]) => containerKind(obj(service, 'service')) === kind);
    const gatewayServices = byKind('gateway');
    const platformServices = byKind('platform');

    it('has two gateways, the platform, PostgreSQL 17 and Redis 7', () => {
      expect(gatewayServices).toHaveLength(2);
      expect(platformServices).toHaveLength(1);
      const images = Object.values(services).map((service) => String(obj(service, 'service')['image']));
      expect(images.some((image) => /^postgres:17\b/.test(image))).toBe(true);
      expect(images.some((image) => /^redis:7\b/.test(image))).toBe(true);
    });

    it.each(gatewayServices)('%s: env names, ports, upstream and dependencies', (name, raw) => {
      const service = obj(raw, name);
      const env = environment(service);
      for (const variable of env.keys()) expect(ENV_NAMES, `${name}: ${variable}`).toContain(variable);
      const { port, ops } = gatewayPorts(env);
      for (const mapping of list(service['ports']).map(String)) {
        const parts = mapping.replace(/\/(tcp|udp)$/, '').split(':');
        const target = Number(parts.at(-1));
        expect([port, ops], `${name}: ${mapping}`).toContain(target);
        if (target === ops) expect(parts[0], `${name}: ops port published on loopback only`).toBe('127.0.0.1');
      }
      const [platformName, platformRaw] = platformServices[0] ?? [];
      const upstream = new URL(env.get('UPSTREAM_URL') ?? DEFAULTS.UPSTREAM_URL);
      expect(upstream.hostname).toBe(platformName);
      expect(Number(upstream.port)).toBe(Number(environment(obj(platformRaw, 'platform')).get('PORT') ?? 3000));
      expect(services[new URL(String(env.get('DATABASE_URL'))).hostname], 'DATABASE_URL host is a service').toBeDefined();
      expect(services[new URL(String(env.get('REDIS_URL'))).hostname], 'REDIS_URL host is a service').toBeDefined();
      const healthcheck = list(obj(service['healthcheck'], name)['test']).join(' ');
      expect(healthcheck).toMatch(new RegExp(`127\\.0\\.0\\.1:${ops}/(healthz|readyz)\\b`));
    });

    it('the platform publishes no port and reads only its own variables', () => {
      for (const [name, raw] of platformServices) {
        const service = obj(raw, name);
        expect(service['ports'], `${name} must be reached through a gateway`).toBeUndefined();
        for (const variable of environment(service).keys()) expect(PLATFORM_ENV_NAMES, `${name}: ${variable}`).toContain(variable);
        expect(environment(service).get('HOST')).toBe('0.0.0.0');
      }
    });
  });

  describe('Dockerfile', () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');

    it('exposes PORT and OPS_PORT, health-checks /healthz on OPS_PORT, runs as node', () => {
      expect(dockerfile).toMatch(new RegExp(`^EXPOSE ${DEFAULTS.PORT} ${DEFAULTS.OPS_PORT}$`, 'm'));
      expect(dockerfile).toMatch(/^HEALTHCHECK [\s\S]*OPS_PORT \|\| 8081\) \+ '\/healthz'/m);
      expect(dockerfile).toContain(`|| ${DEFAULTS.OPS_PORT})`);
      expect(dockerfile).toMatch(/^USER node$/m);
      expect(dockerfile).toMatch(/npm ci --omit=dev/);
      // The server starts as `npm start` starts it, from the compiled build, with its environment.
      const start = npmStart(ROOT);
      const startCommand = ['node', ...start.flags, start.script].join(' ');
      const cmd = /^CMD (\[.*\])$/m.exec(dockerfile)?.[1];
      expect(cmd).toBeDefined();
      expect((JSON.parse(cmd!) as string[]).join(' ')).toBe(startCommand);
      expect(startCommand).toMatch(/^node (--\S+ )*dist\/main\.js$/);
      expect(dockerfile).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
      const envEntries = [...dockerfile.matchAll(/^ENV ([\s\S]*?)(?<!\\)$/gm)].flatMap((match) =>
        [...(match[1] ?? '').matchAll(/([A-Z_]+)=(\S+)/g)].map((entry) => `${entry[1]}=${entry[2]}`),
      );
      const runtimeEnv = Object.entries(start.env).map(([name, value]) => `${name}=${value}`);
      expect(runtimeEnv).toContain('MALLOC_ARENA_MAX=2');
      expect(runtimeEnv).toContain('MALLOC_MMAP_THRESHOLD_=16384');
      for (const entry of runtimeEnv) expect(envEntries).toContain(entry);
      const runtimeNames = new Set(['NODE_ENV', ...runtimeEnv.map((entry) => entry.split('=')[0])]);
      for (const name of envEntries.map((entry) => entry.split('=')[0]!).filter((name) => !runtimeNames.has(name))) expect(ENV_NAMES).toContain(name);
    });
  });
});
