import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../../src/errors/gateway-error.ts';
import { createKeyStateListener } from '../../../src/redis/key-state-listener.ts';
import type { BarrierResult } from '../../../src/redis/revocation-bus.ts';

const barrier = (fields: Partial<BarrierResult>): BarrierResult => ({
  published: true,
  receivers: 3,
  acked: 3,
  missed: 0,
  registered: 3,
  lapsed: 0,
  durationMs: 4,
  ...fields,
});

describe('createKeyStateListener', () => {
  it('without Redis, evicts locally and is done', async () => {
    const evicted: number[] = [];
    await createKeyStateListener({ evict: (keyId) => evicted.push(keyId) }).keyChanged(4);
    expect(evicted).toEqual([4]);
  });

  it('evicts locally before announcing, and answers once the barrier has', async () => {
    const steps: string[] = [];
    const observed: BarrierResult[] = [];
    const listener = createKeyStateListener({
      evict: (keyId) => steps.push(`evict ${keyId}`),
      bus: {
        announce: async (keyId) => {
          steps.push(`announce ${keyId}`);
          return barrier({});
        },
      },
      observe: (result) => observed.push(result),
    });
    await listener.keyChanged(9);
    expect(steps).toEqual(['evict 9', 'announce 9']);
    expect(observed).toEqual([barrier({})]);
  });

  it('still answers when a replica missed the barrier (it was logged and counted)', async () => {
    const observed: BarrierResult[] = [];
    const listener = createKeyStateListener({
      evict: () => {},
      bus: { announce: async () => barrier({ acked: 2, missed: 1, durationMs: 2000 }) },
      observe: (result) => observed.push(result),
    });
    await expect(listener.keyChanged(1)).resolves.toBeUndefined();
    expect(observed[0]!.missed).toBe(1);
  });

  it('refuses with store_unavailable when the change could not be published at all', async () => {
    const listener = createKeyStateListener({
      evict: () => {},
      bus: { announce: async () => barrier({ published: false, receivers: 0, acked: 0 }) },
    });
    const error = await listener.keyChanged(1).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).code).toBe('store_unavailable');
  });
});
