import { afterAll, describe, expect, it } from 'vitest';
import { loginAdmin, request } from '../support/http.ts';
import { startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { until } from '../support/until.ts';
import { startProxyFixture, type ProxyFixture } from '../support/proxy-fixture.ts';

describe('graceful shutdown on SIGTERM under traffic', () => {
  let f: ProxyFixture | undefined;
  let restarted: GatewayProcess | undefined;
  afterAll(async () => {
    await restarted?.stop();
    await f?.close();
  });

  it('turns /readyz 503, finishes every in-flight request and stream, writes the last use, exits 0', async () => {
    f = await startProxyFixture();
    const { key, id } = await f.key({ scopes: ['events:write'] });
    const gateway = f.gateway;

    // Three slow requests (the origin answers /slow/ after 3 s) and an event stream, in flight.
    const slow = [1, 2, 3].map((n) => request(`${gateway.url}/slow/${n}`, { token: f!.admin }));
    const stream = fetch(`${gateway.url}/sse/feed`, { headers: { authorization: `Bearer ${f.admin}` } }).then((response) => response.text());
    // The last use of the key, just before the signal: the write-behind batch has not run yet.
    const used = await request(`${gateway.url}/api/v1/agents/1/events`, { method: 'POST', token: key, json: { last: true } });
    expect(used.status).toBe(200);
    // In flight means upstream: the origin has the three slow requests and the stream.
    await until(() => f!.origin.receivedAt('/slow/').length === 3 && f!.origin.receivedAt('/sse/').length === 1, 'the requests upstream');

    const exited = new Promise<number | null>((resolve) => gateway.child.once('exit', (code) => resolve(code)));
    gateway.child.kill('SIGTERM');
    // Draining from the signal on: readiness says so (waited for, not slept).
    let ready = await fetch(`${gateway.opsUrl}/readyz`);
    await until(async () => {
      ready = await fetch(`${gateway.opsUrl}/readyz`);
      return ready.status === 503;
    }, 'readiness to say draining');
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ status: 'draining' });
    // Liveness is the process alone: draining is not a reason to be restarted.
    expect((await fetch(`${gateway.opsUrl}/healthz`)).status).toBe(200);
    // No new connection is accepted once draining has begun.
    await expect(fetch(`${gateway.url}/api/v1/agents/1/events`, { method: 'POST' })).rejects.toThrow();

    const answers = await Promise.all(slow);
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 200]);
    expect(answers.map((answer) => answer.body)).toEqual([{ slow: true }, { slow: true }, { slow: true }]);
    expect(await stream).toContain('data: event 2');
    expect(await exited).toBe(0);
    expect(gateway.output()).not.toMatch(/"level":50/);

    // The last use was written on the way out: a restart on the same data shows it.
    restarted = await startGateway(gateway.env);
    const admin = await loginAdmin(restarted.url);
    const list = await request(`${restarted.url}/api/v1/api-keys`, { token: admin });
    const record = (list.body as Array<{ id: number; last_used_at: string | null }>).find((candidate) => candidate.id === id);
    expect(record?.last_used_at).not.toBeNull();
  });
});
