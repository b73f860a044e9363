/* eslint-disable @typescript-eslint/no-explicit-any -- log lines and HTTP answers are read as loosely typed JSON */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendChecksum, generateKey } from '../../src/credentials/key-format.ts';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { startOrigin, type Origin } from '../support/origin.ts';

/** A query a careless client might send: a credential in it must never reach the log. */
const SECRET_QUERY = 'api_key=ghk_SECRETinTHEquery&token=s3cr3t-t0ken';

describe('the `request refused` line: what an operator needs to tell which request it was, no secret', { timeout: 120_000 }, () => {
  let origin: Origin;
  let gateway: GatewayProcess;
  let token: string;

  beforeAll(async () => {
    origin = await startOrigin();
    gateway = await startGateway({ UPSTREAM_URL: origin.url, LOG_LEVEL: 'info' });
    token = await loginAdmin(gateway.url);
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
  });

  /** The refusal line of the request answered with this request id, once it is written. */
  const refusalLine = async (reqId: string): Promise<any> => {
    let line: any;
    await expect
      .poll(() => {
        line = gateway
          .output()
          .split('\n')
          .filter((text) => text.includes('"request refused"'))
          .map((text) => JSON.parse(text))
          .find((entry) => entry.reqId === reqId);
        return line;
      })
      .toBeDefined();
    return line;
  };

  it('a well-formed key that is no key: method, route, path without the query, credential kind and key prefix; never the key', async () => {
    // Well formed (its checksum matches), so its prefix is the public part any key shows in lists.
    const wrongKey = generateKey();
    const response = await fetch(`${gateway.url}/api/v1/agents/7/events?${SECRET_QUERY}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${wrongKey}`, 'content-type': 'application/json' },
      body: '{"type":"ping"}',
    });
    expect(response.status).toBe(401);
    const line = await refusalLine(response.headers.get('x-request-id')!);
    expect(line).toMatchObject({
      msg: 'request refused',
      code: 'invalid_credential',
      status: 401,
      method: 'POST',
      route: 'events',
      path: '/api/v1/agents/7/events',
      credential: 'api_key',
      keyPrefix: wrongKey.slice(0, 12),
    });
    expect(line.keyId).toBeUndefined();
    const text = JSON.stringify(line);
    expect(text).not.toContain(wrongKey.slice(12));
    for (const secret of ['SECRETinTHEquery', 's3cr3t-t0ken', 'api_key=', '?']) expect(text).not.toContain(secret);
    expect(origin.received).toHaveLength(0);
  });

  it('a real key without the scope: its id and prefix, the route', async () => {
    const created = (await createKey(gateway.url, token, { name: 'mcp only', scopes: ['mcp:agents'] })).body;
    const response = await request(`${gateway.url}/api/v1/agents/7/events?${SECRET_QUERY}`, { method: 'POST', token: created.key, json: { type: 'ping' } });
    expect(response.status).toBe(403);
    const line = await refusalLine(response.headers.get('x-request-id')!);
    expect(line).toMatchObject({ code: 'insufficient_scope', method: 'POST', route: 'events', path: '/api/v1/agents/7/events', credential: 'api_key', keyId: created.id, keyPrefix: created.key_prefix });
    expect(JSON.stringify(line)).not.toContain(created.key.slice(12));
    expect(origin.received).toHaveLength(0);
  });

  it('a malformed key: its kind by shape, no prefix taken from what is not a key', async () => {
    // The key's shape with a wrong checksum: its first 12 characters are not a key's prefix.
    const valid = appendChecksum(`ghk_${'a'.repeat(40)}`);
    const malformed = valid.slice(0, -1) + (valid.endsWith('Z') ? 'Y' : 'Z');
    const response = await fetch(`${gateway.url}/dashboard/settings?${SECRET_QUERY}`, { headers: { authorization: `Bearer ${malformed}` } });
    expect(response.status).toBe(401);
    const line = await refusalLine(response.headers.get('x-request-id')!);
    expect(line).toMatchObject({ method: 'GET', route: 'admin', path: '/dashboard/settings', credential: 'api_key' });
    expect(line.keyPrefix).toBeUndefined();
    expect(JSON.stringify(line)).not.toContain('aaaaaaaa');
  });

  it('a refusal by one of the gateway\'s own endpoints names the endpoint', async () => {
    const response = await fetch(`${gateway.url}/api/v1/api-keys?${SECRET_QUERY}`, { headers: { authorization: 'Bearer not-a-token' } });
    expect(response.status).toBe(401);
    const line = await refusalLine(response.headers.get('x-request-id')!);
    expect(line).toMatchObject({ method: 'GET', endpoint: '/api/v1/api-keys', path: '/api/v1/api-keys', credential: 'unknown' });
    expect(JSON.stringify(line)).not.toContain('not-a-token');
  });

  it('an MCP refusal names its route and key', async () => {
    const created = (await createKey(gateway.url, token, { name: 'events only', scopes: ['events:write'] })).body;
    const response = await request(`${gateway.url}/mcp?${SECRET_QUERY}`, {
      method: 'POST',
      token: created.key,
      headers: { accept: 'application/json, text/event-stream' },
      json: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    });
    expect(response.status).toBe(403);
    const line = await refusalLine(response.headers.get('x-request-id')!);
    expect(line).toMatchObject({ method: 'POST', route: 'mcp', path: '/mcp', credential: 'api_key', keyId: created.id, keyPrefix: created.key_prefix });
  });

  it('a browser\'s /favicon.ico is answered 404 by the gateway: no refusal line, nothing forwarded', async () => {
    const before = gateway.output();
    for (const method of ['GET', 'HEAD']) {
      const response = await fetch(`${gateway.url}/favicon.ico`, { method });
      expect(response.status).toBe(404);
      if (method === 'GET') expect(await response.json()).toMatchObject({ code: 'not_found', status: 404 });
    }
    // A refused request after it, so that the log is known to have caught up.
    const after = await fetch(`${gateway.url}/dashboard`);
    expect(after.status).toBe(401);
    await refusalLine(after.headers.get('x-request-id')!);
    const written = gateway.output().slice(before.length);
    expect(written).not.toContain('favicon');
    expect(origin.received).toHaveLength(0);
  });
});
