import type { KeyStateListener } from '../keys/key-service.ts';
import { DEFAULT_REDIS_CONNECT_TIMEOUT_MS } from '../redis/connection.ts';
import type { SessionEndListener } from '../admin/session-service.ts';
import { createKeyStateListener } from '../redis/key-state-listener.ts';
import { createSessionEndListener } from '../redis/session-end-listener.ts';
import { RedisTier } from '../redis/redis-tier.ts';
import type { BarrierResult } from '../redis/revocation-bus.ts';
import type { CliIo } from './command.ts';
import type { StoreContext } from './context.ts';

/** What a command that changes a key's state tells its user about the running gateways. */
export interface Revocations {
  listener: KeyStateListener;
  /** The same barrier for admin sessions the command ends. */
  sessions: SessionEndListener;
  /** The last barrier, for the command's output; undefined without REDIS_URL. */
  last(): BarrierResult | undefined;
}

/**
 * With REDIS_URL set, the command joins the revocation bus for its lifetime, so a key it
 * revokes is dropped by every running gateway before it exits, exactly as DELETE does (and,
 * as DELETE, it fails when Redis cannot confirm: the change is stored, retrying announces it).
 * Without Redis there is no bus: gateways on PostgreSQL re-read a key's state within
 * KEY_CACHE_TTL, and a gateway on the embedded store holds its directory alone.
 */
export async function withRevocations<T>(io: CliIo, context: StoreContext, fn: (revocations: Revocations) => Promise<T>): Promise<T> {
  const url = context.config.env.REDIS_URL;
  if (url === undefined) return fn({ listener: { keyChanged: async () => {} }, sessions: { sessionsEnded: async () => {} }, last: () => undefined });

  const warn = (_fields: Record<string, unknown>, message: string) => void io.stderr.write(`gatehouse: ${message}\n`);
  const tier = await RedisTier.open({ url, commandTimeoutMs: context.config.env.REDIS_COMMAND_TIMEOUT, store: context.store, log: { info: () => {}, warn, error: warn } });
  try {
    let subscribed!: () => void;
    const ready = new Promise<void>((resolve) => (subscribed = resolve));
    const bus = tier.startRevocations({ evict: () => {}, setDegraded: (degraded) => degraded || subscribed() });
    // Subscribed first, or our own acknowledgement channel would miss the replicas' answers.
    await Promise.race([ready, new Promise((resolve) => setTimeout(resolve, DEFAULT_REDIS_CONNECT_TIMEOUT_MS).unref())]);
    let last: BarrierResult | undefined;
    const observe = (result: BarrierResult) => (last = result);
    const listener = createKeyStateListener({ evict: () => {}, bus, observe });
    return await fn({ listener, sessions: createSessionEndListener({ bus, observe }), last: () => last });
  } finally {
    await tier.close();
  }
}

/** One line for stderr: how many running gateways confirmed the change. */
export function describeBarrier(result: BarrierResult | undefined): string | undefined {
  if (result === undefined || !result.published) return undefined;
  // This process is subscribed too and acknowledges itself: it is not a gateway.
  const gateways = Math.max(0, result.receivers - 1);
  const acked = Math.max(0, result.acked - 1);
  const missed = result.missed > 0 ? `; ${result.missed} did not answer within the barrier and drop it within KEY_CACHE_TTL` : '';
  return `${acked} of ${gateways} running gateway(s) confirmed they dropped the key${missed}`;
}
