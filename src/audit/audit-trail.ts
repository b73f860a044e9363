import type { AuditEventRow, Store } from '../store/store.ts';

/** What the audit trail records (issue 6: the spec leaves events open). */
export const AUDIT_ACTIONS = [
  'login_succeeded',
  'login_failed',
  'key_created',
  'key_revoked',
  'key_updated',
  'key_disabled',
  'key_enabled',
  'key_rotated',
  'admin_created',
  'admin_password_reset',
  'logout',
  'session_ended',
  'password_changed',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who did it: an admin through the HTTP API, or an operator through the `gatehouse` CLI. */
export const ACTOR_KINDS = ['admin', 'cli'] as const;
export type ActorKind = (typeof ACTOR_KINDS)[number];

export interface AuditEntry {
  action: AuditAction;
  actorKind: ActorKind | null;
  actorId: string | null;
  /** The key id, or the admin id an admin action was about. */
  subjectId: string | null;
  clientAddress: string | null;
  detail?: Record<string, unknown>;
}

/**
 * The login events of the audit trail: written to the store one after another, in the order
 * they happened, off the request path (a slow store does not slow a login down), and flushed on
 * shutdown. A change to keys or admins is not recorded here: its event is written in the
 * change's own transaction, before the answer leaves (`AuditOf` in store/store.ts). `list` first
 * waits for what this replica has not written yet, so an admin reads their own actions at once.
 */
export class AuditTrail {
  readonly #store: Store;
  readonly #now: () => Date;
  readonly #onError: (error: unknown) => void;
  #pending: Promise<void> = Promise.resolve();

  constructor(deps: { store: Store; now: () => Date; onError: (error: unknown) => void }) {
    this.#store = deps.store;
    this.#now = deps.now;
    this.#onError = deps.onError;
  }

  record(entry: AuditEntry): void {
    const event = { ...entry, detail: entry.detail ?? {}, at: this.#now() };
    this.#pending = this.#pending.then(() => this.#store.appendAuditEvent(event)).then(
      () => {},
      (error: unknown) => this.#onError(error),
    );
  }

  /** Resolves once everything recorded so far is written (or reported as failed). */
  flush(): Promise<void> {
    return this.#pending;
  }

  /** Newest first; `before` is an event id, for paging. */
  async list(options: { limit: number; before?: number }): Promise<AuditEventRow[]> {
    await this.flush();
    return this.#store.listAuditEvents(options);
  }
}
