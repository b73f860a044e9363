/* eslint-disable @typescript-eslint/no-explicit-any -- the OpenAPI document and the answers are read as loose JSON */
import type { AddressInfo } from 'node:net';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, type Gateway } from '../../src/app.ts';
import { loadConfig, type Config } from '../../src/config/load.ts';
import { FAVICON_PATH } from '../../src/http/favicon.ts';
import { DOCS_PATH, OPENAPI_PATH } from '../../src/http/openapi.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { decodeJwt } from 'jose';
import { ADMIN_PASSWORD, FAST_ARGON2, REPO_ROOT, startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { loginAdmin, request, type JsonResponse } from '../support/http.ts';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
/** The reference page and its script: a rendering of the document, not part of the API it describes. */
const DOCS_ROUTES = new Set([DOCS_PATH, `${DOCS_PATH}/`, `${DOCS_PATH}/js/scalar.js`]);

async function buildInProcess(env: Record<string, string> = {}): Promise<{ app: FastifyInstance; store: Store; config: Config; gateway: Gateway }> {
  const config = loadConfig({ CONFIG_DIR: `${REPO_ROOT}config`, LOG_LEVEL: 'silent', ...FAST_ARGON2, ...env });
  const store = await openStore({ dataDir: tempDataDir() });
  const gateway = await build(config, { store });
  await gateway.app.ready();
  return { app: gateway.app, store, config, gateway };
}

/**
 * The paths fastify routes to a handler of the gateway's own, read from `printRoutes`
 * (a tree: each line's segment continues its parent's). The proxy's catch-all (`/`, `*`) is
 * not one of them.
 */
function ownPaths(app: FastifyInstance): string[] {
  const stack: Array<{ depth: number; path: string }> = [];
  const paths: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    const match = /^([│ ├└─]*)(\S+) \(/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length;
    while (stack.length && stack.at(-1)!.depth >= depth) stack.pop();
    const parent = stack.at(-1)?.path ?? '';
    const segment = match[2]!;
    const path = parent === '/' ? `/${segment.replace(/^\//, '')}` : parent + segment;
    stack.push({ depth, path });
    if (segment !== '*' && path !== '/') paths.push(path);
  }
  return paths;
}

const toTemplate = (path: string) => path.replace(/:(\w+)/g, '{$1}');

describe('OpenAPI: every route the gateway serves itself is described', () => {
  let app: FastifyInstance;
  let store: Store;
  let document: any;
  /** Paths of the route table (MCP): the upstream's endpoints, authorized and forwarded, not the gateway's API. */
  let proxied: Set<string>;

  beforeAll(async () => {
    let config: Config;
    ({ app, store, config } = await buildInProcess());
    proxied = new Set(config.tables.routes.filter((route) => !route.rest).map((route) => route.path));
    document = (await app.inject(OPENAPI_PATH)).json();
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it('finds the gateway\'s own routes (the check below is not vacuous)', () => {
    expect(ownPaths(app)).toEqual(
      expect.arrayContaining([
        '/api/v1/auth/login',
        '/api/v1/auth/logout',
        '/api/v1/auth/sessions',
        '/api/v1/auth/sessions/:id',
        '/api/v1/auth/password',
        '/api/v1/api-keys', '/api/v1/api-keys/:id',         '/api/v1/api-keys/:id/rotate',
        '/api/v1/audit-events',
        OPENAPI_PATH,
        ...DOCS_ROUTES,
      ]),
    );
  });

  it('has every path, and answers 405 for every method it does not describe', async () => {
    // The 404 for browsers' /favicon.ico is no part of the API.
    const served = ownPaths(app).filter((path) => !DOCS_ROUTES.has(path) && path !== FAVICON_PATH && !proxied.has(toTemplate(path)));
    expect(Object.keys(document.paths).sort()).toEqual(served.map(toTemplate).sort());
    for (const path of served) {
      const described = Object.keys(document.paths[toTemplate(path)]).map((method) => method.toUpperCase());
      const url = path.replace(':id', '1');
      for (const method of METHODS) {
        const response = await app.inject({ method, url });
        const implied = method === 'HEAD' && described.includes('GET');
        if (described.includes(method) || implied) {
          expect([404, 405], `${method} ${path}`).not.toContain(response.statusCode);
        } else {
          expect(response.statusCode, `${method} ${path}`).toBe(405);
          if (method !== 'HEAD') expect(response.json().code).toBe('method_not_allowed');
          expect(response.headers.allow).toBeDefined();
        }
      }
    }
  });

  it('is OpenAPI 3.1 with resolvable references and an operation id for each operation', () => {
    expect(document.openapi).toBe('3.1.0');
    const text = JSON.stringify(document);
    for (const [, name] of text.matchAll(/"#\/components\/schemas\/(\w+)"/g)) expect(document.components.schemas).toHaveProperty(name!);
    const ids = Object.values(document.paths).flatMap((item: any) => Object.values(item).map((operation: any) => operation.operationId));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => typeof id === 'string')).toBe(true);
  });

  it('lists the known scopes in the create body, from the same schema that validates it', () => {
    const scopes = document.components.schemas.CreateApiKeyRequest.properties.scopes.items.enum;
    expect(scopes).toEqual(expect.arrayContaining(['events:write', 'mcp:calls', 'mcp:agents', 'mcp:tools']));
    expect(scopes).not.toContain('mcp:*');
    expect(document.components.schemas.CreateApiKeyRequest.additionalProperties).toBe(false);
  });
});

describe('OpenAPI and /docs can be turned off', () => {
  it.each<{ env: Record<string, string>; openapi: boolean; docs: boolean }>([
    { env: { OPENAPI_ENABLED: 'false' }, openapi: false, docs: false },
    { env: { DOCS_ENABLED: 'false' }, openapi: true, docs: false },
    { env: {}, openapi: true, docs: true },
  ])('$env: document $openapi, page $docs', async ({ env, openapi, docs }) => {
    const { app, store, gateway } = await buildInProcess(env);
    try {
      // Turned off, the paths stay the gateway's (reserved): 404, never the proxy's catch-all.
      await gateway.listen(0, '127.0.0.1');
      const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      const spec = await fetch(`${base}${OPENAPI_PATH}`);
      expect(spec.status).toBe(openapi ? 200 : 404);
      const page = await fetch(`${base}${DOCS_PATH}/`);
      expect(page.status).toBe(docs ? 200 : 404);
    } finally {
      await app.close();
      await store.close();
    }
  });
});

describe('OpenAPI: the answers of a real session match the document', () => {
  let gateway: GatewayProcess;
  let document: any;
  let ajv: Ajv2020;
  const seen = new Set<string>();

  beforeAll(async () => {
    gateway = await startGateway({ LICENSE_API_KEYS: '2' });
    const response = await request(`${gateway.url}${OPENAPI_PATH}`);
    expect(response.status).toBe(200);
    document = response.body;
    // Formats are not asserted by the validator: zod gives each date-time a pattern as well.
    ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    ajv.addSchema(relocate({ $id: 'components', $defs: document.components.schemas }));
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  /** `#/components/schemas/X` as a reference into the schema registered as `components`. */
  function relocate<T>(schema: T): T {
    return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', '"components#/$defs/'));
  }

  /** Asserts that the answer is one the document describes for this operation, body and headers. */
  function conforms(response: JsonResponse, method: string, template: string): void {
    const operation = document.paths[template]?.[method];
    expect(operation, `${method} ${template} is in the document`).toBeDefined();
    const described = operation.responses[String(response.status)];
    expect(described, `${method} ${template} answered ${response.status}: ${response.text}`).toBeDefined();
    seen.add(`${method} ${template} ${response.status}`);
    const contentType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
    if (!described.content) {
      expect(response.text).toBe('');
      return;
    }
    expect(Object.keys(described.content)).toContain(contentType);
    const validate = ajv.compile(relocate(described.content[contentType].schema));
    expect(validate(response.body), `${method} ${template} ${response.status}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    for (const [name, header] of Object.entries<any>(described.headers ?? {})) {
      const value = response.headers.get(name);
      expect(value, `${name} on ${method} ${template} ${response.status}`).not.toBeNull();
      if (header.schema?.const !== undefined) expect(value).toBe(header.schema.const);
    }
  }

  it('serves the document without credentials, as JSON', async () => {
    const response = await request(`${gateway.url}${OPENAPI_PATH}`);
    conforms(response, 'get', OPENAPI_PATH);
  });

  it('login: 200, 400, 401, 415', async () => {
    const login = '/api/v1/auth/login';
    const url = `${gateway.url}${login}`;
    conforms(await request(url, { method: 'POST', json: { email: 'ops@example.test', password: 'correct horse battery staple' } }), 'post', login);
    conforms(await request(url, { method: 'POST', json: { email: 'ops@example.test' } }), 'post', login);
    conforms(await request(url, { method: 'POST', json: { email: 'ops@example.test', password: 'wrong password' } }), 'post', login);
    conforms(await request(url, { method: 'POST', body: 'email=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 'post', login);
  });

  it('api-keys: create, list and revoke, and their refusals', async () => {
    const token = await loginAdmin(gateway.url);
    const keys = `${gateway.url}/api/v1/api-keys`;
    const created = await request(keys, { method: 'POST', token, json: { name: 'documented', agent_id: 7, scopes: ['events:write', 'mcp:agents'] } });
    conforms(created, 'post', '/api/v1/api-keys');
    conforms(await request(keys, { method: 'POST', token, json: { name: 'expiring', expires_at: '2099-01-01T00:00:00+02:00' } }), 'post', '/api/v1/api-keys');
    conforms(await request(keys, { method: 'POST', token, json: { name: 'over the cap' } }), 'post', '/api/v1/api-keys');
    conforms(await request(keys, { method: 'POST', token, json: { name: 'x', scopes: ['mcp:*'] } }), 'post', '/api/v1/api-keys');
    conforms(await request(keys, { method: 'POST', json: { name: 'no token' } }), 'post', '/api/v1/api-keys');
    conforms(await request(keys, { method: 'POST', token: created.body.key, json: { name: 'an api key' } }), 'post', '/api/v1/api-keys');
    conforms(await request(keys, { token }), 'get', '/api/v1/api-keys');
    conforms(await request(keys, { token: 'not.a.jwt' }), 'get', '/api/v1/api-keys');
    const one = '/api/v1/api-keys/{id}';
    conforms(await request(`${keys}/${created.body.id}`, { method: 'DELETE', token }), 'delete', one);
    conforms(await request(`${keys}/999`, { method: 'DELETE', token }), 'delete', one);
    conforms(await request(`${keys}/abc`, { method: 'DELETE', token }), 'delete', one);
    // A revoked key stays in the list, with its status.
    conforms(await request(keys, { token }), 'get', '/api/v1/api-keys');
  });

  it('api-keys/{id}: read, change and rotate, and their refusals', async () => {
    const token = await loginAdmin(gateway.url);
    const keys = `${gateway.url}/api/v1/api-keys`;
    const one = '/api/v1/api-keys/{id}';
    const rotate = '/api/v1/api-keys/{id}/rotate';
    // The cap (2) holds one live key from the test above: this one is the second.
    const created = await request(keys, { method: 'POST', token, json: { name: 'lifecycle', agent_id: 3 } });
    expect(created.status).toBe(201);
    const id = created.body.id as number;
    conforms(await request(`${keys}/${id}`, { token }), 'get', one);
    conforms(await request(`${keys}/999`, { token }), 'get', one);
    conforms(await request(`${keys}/01`, { token }), 'get', one);
    conforms(await request(`${keys}/${id}`, { token: 'not.a.jwt' }), 'get', one);

    const patched = await request(`${keys}/${id}`, { method: 'PATCH', token, json: { name: 'renamed', rate_limit: { requests: 10, per_seconds: 60 }, enabled: false } });
    conforms(patched, 'patch', one);
    expect(patched.body).toMatchObject({ name: 'renamed', enabled: false, status: 'disabled', rate_limit: { requests: 10, per_seconds: 60 } });
    const merge = await request(`${keys}/${id}`, { method: 'PATCH', token, headers: { 'content-type': 'application/merge-patch+json' }, body: '{"agent_id":null,"enabled":true}' });
    conforms(merge, 'patch', one);
    expect(merge.body).toMatchObject({ agent_id: null, enabled: true, status: 'active' });
    conforms(await request(`${keys}/${id}`, { method: 'PATCH', token, json: {} }), 'patch', one);
    conforms(await request(`${keys}/${id}`, { method: 'PATCH', token, body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 'patch', one);
    conforms(await request(`${keys}/999`, { method: 'PATCH', token, json: { name: 'x' } }), 'patch', one);

    const rotated = await request(`${keys}/${id}/rotate`, { method: 'POST', token, json: { grace_seconds: 60 } });
    conforms(rotated, 'post', rotate);
    expect(rotated.body).toMatchObject({ rotated_from: id, name: 'renamed' });
    conforms(await request(`${keys}/${id}/rotate`, { method: 'POST', token }), 'post', rotate);
    conforms(await request(`${keys}/${id}`, { method: 'PATCH', token, json: { expires_at: null } }), 'patch', one);
    conforms(await request(`${keys}/${rotated.body.id}/rotate`, { method: 'POST', token, json: { grace_seconds: -1 } }), 'post', rotate);
    conforms(await request(`${keys}/999/rotate`, { method: 'POST', token }), 'post', rotate);
    expect((await request(`${keys}/${rotated.body.id}`, { method: 'DELETE', token })).status).toBe(204);
    conforms(await request(`${keys}/${rotated.body.id}`, { method: 'PATCH', token, json: { name: 'x' } }), 'patch', one);
    conforms(await request(`${keys}/${rotated.body.id}/rotate`, { method: 'POST', token }), 'post', rotate);
  });

  it('audit-events: newest first, paged, and its refusals', async () => {
    const token = await loginAdmin(gateway.url);
    const audit = `${gateway.url}/api/v1/audit-events`;
    const all = await request(audit, { token });
    conforms(all, 'get', '/api/v1/audit-events');
    const ids = all.body.map((event: any) => event.id);
    expect(ids).toEqual([...ids].sort((a: number, b: number) => b - a));
    expect(all.body.map((event: any) => event.action)).toEqual(
      expect.arrayContaining(['login_succeeded', 'login_failed', 'key_created', 'key_revoked', 'key_updated', 'key_disabled', 'key_enabled', 'key_rotated']),
    );
    const page = await request(`${audit}?limit=2&before=${ids[1]}`, { token });
    conforms(page, 'get', '/api/v1/audit-events');
    expect(page.body.map((event: any) => event.id)).toEqual(ids.slice(2, 4));
    for (const query of ['limit=0', 'limit=501', 'limit=01', 'before=x', 'colour=red']) {
      const refused = await request(`${audit}?${query}`, { token });
      expect(refused.status, query).toBe(400);
      conforms(refused, 'get', '/api/v1/audit-events');
    }
    conforms(await request(audit), 'get', '/api/v1/audit-events');
  });

  it('auth: sessions listed and ended, a password changed, a logout, and their refusals', async () => {
    const token = await loginAdmin(gateway.url);
    const other = await loginAdmin(gateway.url);
    const sessions = '/api/v1/auth/sessions';
    const one = '/api/v1/auth/sessions/{id}';
    const password = '/api/v1/auth/password';
    const logout = '/api/v1/auth/logout';
    const listed = await request(`${gateway.url}${sessions}`, { token });
    conforms(listed, 'get', sessions);
    expect(listed.body.filter((session: any) => session.current)).toHaveLength(1);
    conforms(await request(`${gateway.url}${sessions}`), 'get', sessions);
    conforms(await request(`${gateway.url}${sessions}`, { token: 'not.a.jwt' }), 'get', sessions);

    const otherId = decodeJwt(other).jti!;
    conforms(await request(`${gateway.url}${sessions}/${otherId}`, { method: 'DELETE', token }), 'delete', one);
    conforms(await request(`${gateway.url}${sessions}/${otherId}`, { method: 'DELETE', token }), 'delete', one);
    conforms(await request(`${gateway.url}${sessions}/${otherId}`, { method: 'DELETE' }), 'delete', one);
    // The ended session's token: 401 revoked_credential, on every admin endpoint.
    const revoked = await request(`${gateway.url}${sessions}`, { token: other });
    expect(revoked.body.code).toBe('revoked_credential');
    conforms(revoked, 'get', sessions);
    conforms(await request(`${gateway.url}/api/v1/api-keys`, { token: other }), 'get', '/api/v1/api-keys');

    const change = (json: unknown) => request(`${gateway.url}${password}`, { method: 'POST', token, json });
    conforms(await change({ current_password: ADMIN_PASSWORD, new_password: 'short' }), 'post', password);
    conforms(await change({ current_password: ADMIN_PASSWORD }), 'post', password);
    conforms(await change({ current_password: 'not the password', new_password: 'a long enough new password' }), 'post', password);
    conforms(await request(`${gateway.url}${password}`, { method: 'POST', token, body: '{"current_password":', headers: { 'content-type': 'application/json' } }), 'post', password);
    conforms(await request(`${gateway.url}${password}`, { method: 'POST', token, body: 'current_password=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 'post', password);
    conforms(await change({ current_password: ADMIN_PASSWORD, new_password: 'a long enough new password' }), 'post', password);
    // And back, for the tests that log in after this one.
    conforms(await change({ current_password: 'a long enough new password', new_password: ADMIN_PASSWORD }), 'post', password);

    conforms(await request(`${gateway.url}${logout}`, { method: 'POST', token }), 'post', logout);
    conforms(await request(`${gateway.url}${logout}`, { method: 'POST', token }), 'post', logout);
    conforms(await request(`${gateway.url}${logout}`, { method: 'POST' }), 'post', logout);
  });

  it('saw the success answer of every operation', () => {
    for (const [template, item] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(item)) {
        const success = Object.keys(operation.responses).find((status) => status.startsWith('2'));
        expect(seen, `${method} ${template}`).toContain(`${method} ${template} ${success}`);
      }
    }
  });

  it('serves the reference page and its script itself, with no credential and nothing from a CDN', async () => {
    const page = await request(`${gateway.url}${DOCS_PATH}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(page.text).toContain(OPENAPI_PATH);
    const sources = [...page.text.matchAll(/<script[^>]*src="([^"]+)"/g)].map((match) => match[1]);
    expect(sources).toEqual(['js/scalar.js']);
    const script = await fetch(`${gateway.url}${DOCS_PATH}/js/scalar.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('javascript');
    expect((await script.text()).length).toBeGreaterThan(100_000);
  });
});
