import { chmodSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ADMIN_EMAIL } from '../../src/admin/bootstrap.ts';
import { INITIAL_PASSWORD_FILE } from '../../src/admin/initial-password-file.ts';
import { emptyDataDir, freePort, REPO_ROOT, runGateway, startGateway, tempDataDir } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';

// Each test starts one or two gateways: generous on a loaded machine.
describe('start-up', { timeout: 120_000 }, () => {
  it.each([
    ['LICENSE_FEATURES', { LICENSE_FEATURES: 'events,teleport' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'not a url' }],
    ['ADMIN_SESSION_TTL', { ADMIN_SESSION_TTL: 'eight hours' }],
    ['PORT', { PORT: '99999' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://localhost/db' }],
    ['LICENSE_API_KEYS', { LICENSE_API_KEYS: '-1' }],
    ['FORWARD_AUTHORIZATION', { FORWARD_AUTHORIZATION: 'maybe' }],
    // Served by the gateway itself, so an MCP endpoint there would never be reached.
    ['MCP_PATH', { MCP_PATH: '/api/v1/auth/mcp' }],
    ['MCP_SSE_PATH', { MCP_SSE_PATH: '/docs/sse', MCP_MESSAGES_PATH: '/messages' }],
  ])('a bad %s stops the process with one line naming it', async (variable, env) => {
    const { code, output } = await runGateway({ OPS_PORT: String(await freePort()), ...env }, 60_000);
    expect(code).not.toBe(0);
    const lines = output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^gatehouse: ${variable}: `));
    if (variable.startsWith('MCP_')) expect(lines[0]).toBe(`gatehouse: ${variable}: lies under a path reserved for the gateway, so it would never be reached`);
  });

  it('a route under a reserved path stops the process with one line naming the route', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gatehouse-routes-'));
    const routes = parse(readFileSync(join(REPO_ROOT, 'config/routes.yaml'), 'utf8')) as { routes: unknown[] };
    const docs = { name: 'platform_docs', path: '/docs/**', methods: ['GET'], credential: 'none' };
    writeFileSync(join(dir, 'routes.yaml'), stringify({ ...routes, routes: [docs, ...routes.routes] }));
    writeFileSync(join(dir, 'mcp-tools.yaml'), readFileSync(join(REPO_ROOT, 'config/mcp-tools.yaml')));
    const { code, output } = await runGateway({ OPS_PORT: String(await freePort()), CONFIG_DIR: dir }, 60_000);
    expect(code).not.toBe(0);
    const lines = output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^gatehouse: CONFIG_DIR: .*routes\.yaml: route "platform_docs": path: lies under a path reserved for the gateway, so it would never be reached$/);
  });

  it('a port in use stops the process naming PORT', async () => {
    const blocker = createServer();
    const port = await new Promise<number>((resolve) =>
      blocker.listen(0, '127.0.0.1', () => resolve((blocker.address() as { port: number }).port)),
    );
    try {
      const { code, output } = await runGateway({ PORT: String(port), OPS_PORT: String(await freePort()) }, 60_000);
      expect(code).toBe(1);
      expect(output).toContain(`gatehouse: PORT: port ${port} is already in use`);
    } finally {
      blocker.close();
    }
  });

  it('with no admin configured, creates one with a generated password in DATA_DIR; a restart keeps it and generates none', async () => {
    // A first start on a new machine: the store is created, migrations and all.
    const dataDir = emptyDataDir();
    const first = await startGateway({ DATA_DIR: dataDir, ADMIN_EMAIL: '', ADMIN_PASSWORD: '' });
    // What the file holds and where it is told is test/e2e/initial-admin-password.test.ts's.
    const email = DEFAULT_ADMIN_EMAIL;
    const password = readFileSync(join(dataDir, INITIAL_PASSWORD_FILE), 'utf8').trim();
    const token = await loginAdmin(first.url, email, password);
    const key = (await createKey(first.url, token, { name: 'survives restarts' })).body;
    expect(await first.stop()).toBe(0);

    const second = await startGateway({ DATA_DIR: dataDir, ADMIN_EMAIL: '', ADMIN_PASSWORD: '' });
    try {
      expect(second.output()).not.toContain('generated password');
      // The signing secret was kept in the store: a token from before the restart still works.
      const listed = await request(`${second.url}/api/v1/api-keys`, { token });
      expect(listed.status).toBe(200);
      expect(listed.body.map((record: { id: number }) => record.id)).toContain(key.id);
      expect(listed.body.find((record: { id: number }) => record.id === key.id).key_prefix).toBe(key.key_prefix);
      await loginAdmin(second.url, email, password);
    } finally {
      await second.stop();
    }
  });

  it('a second gateway on the same DATA_DIR stops with one line naming it; the first goes on, and one after it starts', async () => {
    const dataDir = tempDataDir();
    const first = await startGateway({ DATA_DIR: dataDir });
    try {
      const { code, output } = await runGateway({ DATA_DIR: dataDir, OPS_PORT: String(await freePort()) }, 60_000);
      expect(code).not.toBe(0);
      const lines = output.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toBe(
        `gatehouse: DATA_DIR: cannot open the store: ${dataDir} is in use by another process (a running gateway, or a gatehouse command): ` +
          'stop it first, or share a PostgreSQL database (DATABASE_URL)',
      );
      expect((await request(`${first.opsUrl}/readyz`)).status).toBe(200);
    } finally {
      expect(await first.stop()).toBe(0);
    }
    const next = await startGateway({ DATA_DIR: dataDir });
    await next.stop();
  });

  it('a DATA_DIR open to other users is made private at start, with one warning line naming what was looser', async () => {
    const dataDir = tempDataDir();
    await (await startGateway({ DATA_DIR: dataDir })).stop();
    chmodSync(dataDir, 0o755);
    chmodSync(join(dataDir, 'gatehouse.sqlite'), 0o644);
    const gateway = await startGateway({ DATA_DIR: dataDir });
    try {
      const warnings = gateway.output().split('\n').filter((line) => line.includes('was open to other users'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({
        level: 40,
        msg: `DATA_DIR: ${dataDir} was open to other users, now private to its owner (directory 0700, files 0600): the directory (was 0755), gatehouse.sqlite (was 0644)`,
      });
      expect([statSync(dataDir).mode & 0o777, statSync(join(dataDir, 'gatehouse.sqlite')).mode & 0o777]).toEqual([0o700, 0o600]);
    } finally {
      await gateway.stop();
    }
  });

  it('ADMIN_PASSWORD never overwrites an existing admin password', async () => {
    const dataDir = tempDataDir();
    const first = await startGateway({ DATA_DIR: dataDir, ADMIN_EMAIL: 'a@example.test', ADMIN_PASSWORD: 'first-password' });
    await first.stop();
    const second = await startGateway({ DATA_DIR: dataDir, ADMIN_EMAIL: 'a@example.test', ADMIN_PASSWORD: 'second-password' });
    try {
      await loginAdmin(second.url, 'a@example.test', 'first-password');
      const refused = await request(`${second.url}/api/v1/auth/login`, {
        method: 'POST',
        json: { email: 'a@example.test', password: 'second-password' },
      });
      expect(refused.status).toBe(401);
      expect(second.output()).toContain('ADMIN_PASSWORD differs');
      expect(second.output()).not.toContain('second-password');
    } finally {
      await second.stop();
    }
  });
});
