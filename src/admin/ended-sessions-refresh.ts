import type { Store } from '../store/store.ts';
import type { EndedSessions } from './ended-sessions.ts';

/** Fields are pino's convention: an object first, then the message. */
interface Warn {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface RefreshOptions {
  store: Pick<Store, 'listEndedAdminSessions'>;
  ended: EndedSessions;
  /** `KEY_CACHE_TTL`. */
  everyMs: number;
  now: () => Date;
  log: Warn;
}

/**
 * Sessions ended by another process on the same PostgreSQL (`gatehouse admin reset-password`,
 * another replica) reach this one by reading the ended sessions again every `KEY_CACHE_TTL`, as
 * a key's state is re-read within it: without Redis this is how they arrive; with it, how an end
 * that was stored but never announced (Redis unreachable from the process that ended it, which
 * answered 503 or exited) or that this replica missed still arrives. Repeating such an end does
 * not announce it again: the session is already ended. Returns what stops it.
 */
export function refreshEndedSessions({ store, ended, everyMs, now, log }: RefreshOptions): () => void {
  let running = false;
  const timer = setInterval(
    () => {
      if (running) return;
      running = true;
      void resyncEndedSessions(store, ended, now, log).finally(() => (running = false));
    },
    // A timer over 2^31 − 1 ms fires at once in Node: a very long KEY_CACHE_TTL reads them daily instead.
    Math.min(everyMs, MAX_TIMER_MS),
  );
  timer.unref();
  return () => clearInterval(timer);
}

/** Reads the ended sessions again; once read, the memory is in sync (until the next time an end may be missed). */
export async function resyncEndedSessions(store: Pick<Store, 'listEndedAdminSessions'>, ended: EndedSessions, now: () => Date, log: Warn): Promise<void> {
  const generation = ended.generation;
  try {
    ended.load(await store.listEndedAdminSessions(now()));
    ended.markSynced(generation);
  } catch (error) {
    log.warn({ err: error }, 'could not read the ended admin sessions; each admin request asks the store until they are');
  }
}

/** A day: the longest a timer waits here. */
const MAX_TIMER_MS = 24 * 60 * 60_000;
