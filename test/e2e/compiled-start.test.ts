import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { npmStart, REPO_ROOT, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';

/** `npm start` builds dist/ with `npm run build` and runs `node dist/main.js`: that artifact, not the sources, must work. */
describe('the compiled gateway (npm start: npm run build, then node dist/main.js)', () => {
  let origin: Origin;
  let gateway: GatewayProcess;
  const { version, scripts } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string; scripts: Record<string, string> };

  beforeAll(async () => {
    execFileSync('npm', ['run', '--silent', 'build'], { cwd: REPO_ROOT, stdio: 'pipe' });
    origin = await startOrigin();
    // npm start's own environment and node flags (the memory tuning), read from package.json.
    const { env, flags } = npmStart();
    gateway = await startGateway({ ...env, UPSTREAM_URL: origin.url }, 'dist/main.js', flags);
  }, 120_000);
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
  });

  it('is what npm start runs', () => {
    expect(scripts['prestart']).toBe('npm run --silent build');
    expect(scripts['start']).toMatch(/^([A-Z_]+=\S+ )*node (--\S+ )*dist\/main\.js$/);
    expect(npmStart().script).toBe('dist/main.js');
  });

  it('logs in, creates a key and forwards a request it authorized, with the identity headers', async () => {
    const admin = await loginAdmin(gateway.url);
    const created = await createKey(gateway.url, admin, { name: 'compiled', agent_id: 7 });
    expect(created.status).toBe(201);
    const response = await fetch(`${gateway.url}/api/v1/agents/7/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${created.body.key}`, 'content-type': 'application/json' },
      body: '{"type":"ping"}',
    });
    expect(response.status).toBe(200);
    const [received] = origin.receivedAt('/api/v1/agents/7/events');
    expect(received?.body).toBe('{"type":"ping"}');
    expect(received?.headers['x-auth-key-id']).toBe(String(created.body.id));
    expect(received?.headers['x-auth-agent-id']).toBe('7');
  });

  it('finds its tables, its version and the API reference page from dist/', async () => {
    const document = (await (await fetch(`${gateway.url}/api/v1/openapi.json`)).json()) as { info: { version: string } };
    expect(document.info.version).toBe(version);
    const page = await fetch(`${gateway.url}/docs/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Gatehouse API reference');
    const script = await fetch(`${gateway.url}/docs/js/scalar.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/javascript/);
    expect((await script.arrayBuffer()).byteLength).toBeGreaterThan(1_000_000);
  });
});
