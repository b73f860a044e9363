import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { loginAdmin, request } from '../support/http.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

describe('upstream behaviour', () => {
  let f: ProxyFixture;
  beforeAll(async () => {
    f = await startProxyFixture({ UPSTREAM_TIMEOUT: '1s' });
  });
  afterAll(async () => {
    await f?.close();
  });

  it('streams text/event-stream through without buffering', async () => {
    const response = await fetch(`${f.gateway.url}/sse/feed`, { headers: { authorization: `Bearer ${f.admin}` } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream');
    const reader = response.body!.getReader();
    const first = await reader.read();
    // The first event comes on its own, while the origin has yet to send the last (3 events, 100 ms apart):
    // a gateway that buffered would hand them over together when the stream ends.
    expect(new TextDecoder().decode(first.value)).toContain('data: event 0');
    expect(new TextDecoder().decode(first.value)).not.toContain('data: event 2');
    let rest = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toContain('data: event 2');
  });

  it('answers 504 upstream_timeout when the upstream is too slow', async () => {
    const response = await request(`${f.gateway.url}/slow/x`, { token: f.admin });
    expect(response.status).toBe(504);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(response.body.code).toBe('upstream_timeout');
  });
});

describe('upstream down', () => {
  let gateway: GatewayProcess;
  beforeAll(async () => {
    gateway = await startGateway({ UPSTREAM_URL: `http://127.0.0.1:${await freePort()}` });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('answers 502 upstream_unavailable, promptly', async () => {
    const admin = await loginAdmin(gateway.url);
    const response = await request(`${gateway.url}/dashboard`, { token: admin });
    expect(response.status).toBe(502);
    expect(response.headers.get('content-type')).toContain('application/problem+json');
    expect(response.body.code).toBe('upstream_unavailable');
  });

  it('still refuses unauthenticated requests with 401, never 502', async () => {
    const response = await request(`${gateway.url}/dashboard`);
    expect(response.status).toBe(401);
  });
});
