import { GatewayError } from '../errors/gateway-error.ts';
import type { KeyStateListener } from '../keys/key-service.ts';
import type { BarrierResult } from './revocation-bus.ts';

export interface KeyStateListenerDeps {
  /** This replica's own cache. */
  evict(keyId: number): void;
  /** The barrier across replicas; absent without Redis (one replica, local eviction is all). */
  bus?: { announce(keyId: number): Promise<BarrierResult> };
  /** Every barrier, for `gatehouse_revocation_barrier_*`. */
  observe?(result: BarrierResult): void;
}

/**
 * What KeyService calls after it has written a change of a key's state, before it answers:
 * evict here, then (with Redis) hold the answer until every replica has evicted too, or has
 * stopped trusting its cache because its subscription lease lapsed (see RevocationBus).
 * Replicas without a live lease read state from the store on every request, so they need no
 * message. A replica that did not acknowledge in time is logged and counted, and
 * the answer goes out (docs/adr/0003-revocation-barrier.md). A change that could not be published at all is
 * stored but unconfirmed: the caller gets 503 `store_unavailable` and may retry, because a
 * replica still subscribed to a Redis this one cannot reach would keep its cached state.
 */
export function createKeyStateListener(deps: KeyStateListenerDeps): KeyStateListener {
  return {
    async keyChanged(keyId) {
      deps.evict(keyId);
      if (deps.bus === undefined) return;
      const result = await deps.bus.announce(keyId);
      deps.observe?.(result);
      if (!result.published) {
        throw new GatewayError(
          'store_unavailable',
          'The change is stored, but Redis cannot be reached to confirm that every replica has applied it; retry the request',
        );
      }
    },
  };
}
