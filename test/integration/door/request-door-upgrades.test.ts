import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { EVENTS, expectProblem, failedLine, refusedLine, untilClosed, upgradeRequest, useDoor } from './request-door-support.ts';

describe('RequestDoor: WebSocket upgrades (real upstream and forwarder; stub pipeline)', () => {
  const fixture = useDoor();
  const { begin, receivedBesidesBarrier, logLines } = fixture;

  describe('tunnels an allowed WebSocket upgrade; refuses one that is not', () => {
    it.each([
      ['allowed at once', 'Bearer cached'],
      ['allowed after a promise', 'Bearer cold'],
    ])('%s: the origin sees the upgrade, and messages go both ways', async (_what, authorization) => {
      const { port, pipeline, forwardedIds } = await begin();
      const path = `${EVENTS}/live?since=1`;
      const socket = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { authorization, 'x-request-id': 'trace-ws' } });
      const upgraded = new Promise<IncomingMessage>((resolve) => socket.once('upgrade', resolve));
      const echoed = new Promise<string>((resolve, reject) => {
        socket.once('open', () => socket.send('hello'));
        socket.once('message', (data: Buffer) => resolve(data.toString()));
        socket.once('error', reject);
      });
      try {
        expect(await echoed).toBe('echo: hello');
        expect((await upgraded).headers['x-request-id']).toBe('trace-ws');
      } finally {
        socket.terminate();
      }
      expect(pipeline.calls).toEqual([{ authorization, path: `${EVENTS}/live` }]);
      expect(forwardedIds).toEqual(['trace-ws']);
      expect(fixture.origin.received).toHaveLength(1);
      expect(fixture.origin.received[0]).toMatchObject({ method: 'GET', url: path, body: 'websocket' });
      expect(fixture.origin.received[0]!.headers).toMatchObject({ upgrade: 'websocket', 'x-auth-kind': 'api_key', 'x-auth-key-id': '42', 'x-request-id': 'trace-ws' });
      expect(fixture.origin.received[0]!.headers.authorization).toBeUndefined();
      expect(logLines).toEqual([]);
    });

    // [description, Authorization, Upgrade, status, code]
    const refused: Array<[string, string, string, number, string]> = [
      ['refused at once', 'Bearer revoked', 'websocket', 401, 'revoked_credential'],
      ['refused after a promise', 'Bearer cold-refused', 'websocket', 401, 'invalid_credential'],
      ['a failure (the store is down)', 'Bearer store-down', 'websocket', 503, 'store_unavailable'],
      ['allowed, but not a WebSocket upgrade', 'Bearer cached', 'h2c', 400, 'bad_request'],
    ];

    it.each(refused)('%s: its problem+json, and the connection closed', async (_what, authorization, upgrade, status, code) => {
      const { port, pipeline, fastifyGot, forwardedIds } = await begin();
      const response = await untilClosed(port, upgradeRequest(`${EVENTS}/live`, { Authorization: authorization, 'X-Request-Id': 'trace-ws-refused' }, upgrade));
      expectProblem(response, status, code, 'trace-ws-refused');
      if (status === 401) expect(response.headers['www-authenticate']).toMatch(/^Bearer realm="gatehouse", error="invalid_token"/);
      // An upgrade to anything but WebSocket is refused before any decision: no verification is spent on it.
      expect(pipeline.calls).toHaveLength(upgrade === 'websocket' ? 1 : 0);
      expect(fastifyGot).toEqual([]);
      expect(forwardedIds).toEqual([]);
      expect(logLines).toEqual([status >= 500 ? failedLine('trace-ws-refused') : refusedLine('trace-ws-refused', code, status)]);
      expect(await receivedBesidesBarrier(port, `${EVENTS}/live`)).toEqual([]);
    });
  });
});
