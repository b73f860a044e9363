import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { createTestDatabase, describeWithPostgres, type TestDatabase } from '../support/services.ts';

/**
 * Prints every package the process resolves, and `node:sqlite`, to stderr, through Node's
 * synchronous module hooks (`module.registerHooks`), before the gateway's own modules load.
 */
const REPORT_PACKAGES = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, next) {
    if (specifier === 'node:sqlite' || (/^[@a-z]/.test(specifier) && !specifier.startsWith('node:'))) process.stderr.write('resolved package: ' + specifier + '\\n');
    return next(specifier, context);
  },
});
`)}`;

function resolvedPackages(gateway: GatewayProcess): Set<string> {
  return new Set([...gateway.output().matchAll(/^resolved package: (\S+)$/gm)].map((match) => match[1]!));
}

/**
 * Only the chosen store's driver is loaded (docs/performance.md, "Memory settings"): a gateway
 * on PostgreSQL does not load `node:sqlite`, nor one on the embedded store `pg`. Neither loads
 * PGlite, which only `gatehouse store upgrade` reads 8.0 stores with.
 */
describe('the store driver a gateway loads', { timeout: 120_000 }, () => {
  it('is node:sqlite alone for the embedded store, also once requests have been served', async () => {
    const gateway = await startGateway({}, 'src/main.ts', ['--import', REPORT_PACKAGES]);
    try {
      // The request path: a login, a key created and used, the audit trail read.
      const token = await loginAdmin(gateway.url);
      const { body } = await createKey(gateway.url, token);
      await (await fetch(`${gateway.url}/api/v1/agents/1/events`, { method: 'POST', headers: { authorization: `Bearer ${body.key}` } })).arrayBuffer();
      expect((await request(`${gateway.url}/api/v1/audit-events`, { token })).status).toBe(200);
      const packages = resolvedPackages(gateway);
      expect(packages).toContain('node:sqlite');
      expect(packages).not.toContain('pg');
      expect(packages).not.toContain('@electric-sql/pglite');
    } finally {
      await gateway.stop();
    }
  });

  describeWithPostgres('on PostgreSQL', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
    });
    afterAll(async () => {
      await database.drop();
    });

    it('is pg alone', async () => {
      const gateway = await startGateway({ DATABASE_URL: database.url }, 'src/main.ts', ['--import', REPORT_PACKAGES]);
      try {
        const packages = resolvedPackages(gateway);
        expect(packages).toContain('pg');
        expect(packages).not.toContain('node:sqlite');
        expect(packages).not.toContain('@electric-sql/pglite');
        expect((await fetch(`${gateway.opsUrl}/readyz`)).status).toBe(200);
      } finally {
        await gateway.stop();
      }
    });
  });
});
