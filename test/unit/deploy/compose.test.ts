import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../../src/config/env.ts';
import { compose, isObj, list, obj, str, type Obj } from '../../support/deploy-manifests.ts';
import { containerKind, ENV_NAMES, gatewayPorts, PLATFORM_ENV_NAMES, type Container } from '../../support/deploy-workloads.ts';

/*
 * deploy/docker-compose.yml (env names, ports, upstream and dependencies) against the code, so they cannot drift (the other manifests: the files beside this one).
 */

describe('deploy manifests', () => {
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
});
