import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../../src/config/env.ts';
import { npmStart } from '../../../bench/npm-start.ts';
import { ROOT } from '../../support/deploy-manifests.ts';
import { ENV_NAMES } from '../../support/deploy-workloads.ts';

/*
 * The Dockerfile (ports, health check, user, the start command and its environment) against the code, so they cannot drift (the other manifests: the files beside this one).
 */

describe('deploy manifests', () => {
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
