import pg from 'pg';
import { until } from '../support/until.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { createTestDatabase, describeWithPostgres, type TestDatabase } from '../support/services.ts';

interface AuditEvent {
  action: string;
  actor_kind: string | null;
  subject_id: string | null;
}

/** Runs a change (an HTTP request) under the test's control, and resolves with its answer. */
type Around = <T>(change: () => Promise<T>) => Promise<T>;

/**
 * Issue 22, item 4: a key's change and its audit event are stored in one transaction before the
 * answer leaves, so a `kill -9` right after the answer loses neither. Each change is followed at
 * once by SIGKILL: no shutdown, no flush, nothing written behind the request survives it.
 */
async function killedAfterEachChange(env: Record<string, string>, around: Around = (change) => change()): Promise<void> {
  const started: GatewayProcess[] = [];
  const start = async () => {
    const gateway = await startGateway(env);
    started.push(gateway);
    return { gateway, token: await loginAdmin(gateway.url) };
  };
  try {
    let { gateway, token } = await start();
    const created = await around(() => createKey(gateway.url, token, { name: 'audited through a crash' }));
    expect(created.status).toBe(201);
    await gateway.kill();

    ({ gateway, token } = await start());
    const revoked = await around(() => request(`${gateway.url}/api/v1/api-keys/${created.body.id}`, { method: 'DELETE', token }));
    expect(revoked.status).toBe(204);
    await gateway.kill();

    ({ gateway, token } = await start());
    const trail = await request<AuditEvent[]>(`${gateway.url}/api/v1/audit-events?limit=100`, { token });
    expect(trail.status).toBe(200);
    const events = trail.body.filter((event) => event.subject_id === String(created.body.id) && event.action.startsWith('key_'));
    expect(events.map((event) => event.action).toReversed()).toEqual(['key_created', 'key_revoked']);
    expect(events.every((event) => event.actor_kind === 'admin')).toBe(true);
    const listed = await request<Array<{ id: number; status: string }>>(`${gateway.url}/api/v1/api-keys`, { token });
    expect(listed.body.find((key) => key.id === created.body.id)?.status).toBe('revoked');
  } finally {
    for (const gateway of started) await gateway.kill();
  }
}

/**
 * A kill a few milliseconds after the answer can miss an event written just after it. On
 * PostgreSQL the test can tell for sure: while another session locks audit_events against
 * writes (the keys table stays free), the change must not be answered; once the lock goes, it is.
 */
async function behindAuditLock<T>(url: string, change: () => Promise<T>): Promise<T> {
  const locker = new pg.Client({ connectionString: url });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE audit_events IN EXCLUSIVE MODE');
    let answered = false;
    const answer = change();
    answer.then(() => (answered = true), () => (answered = true));
    // The change's audit write is waiting on the lock (PostgreSQL says so): only then is "not answered yet" a fact.
    await until(async () => {
      const waiting = await locker.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      return (waiting.rows[0] as { n: number }).n > 0 || answered;
    }, 'the audit write to wait on the lock');
    expect(answered, 'the change was answered before its audit event could be written').toBe(false);
    await locker.query('COMMIT');
    return await answer;
  } finally {
    await locker.end();
  }
}

// Three gateway starts per case: generous on a loaded machine.
describe('audit events survive a kill -9 right after the answer', { timeout: 180_000 }, () => {
  it('on the embedded store (the same DATA_DIR)', async () => {
    await killedAfterEachChange({ DATA_DIR: tempDataDir() });
  });

  describeWithPostgres('on PostgreSQL', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('(the same database)', async () => {
      await killedAfterEachChange({ DATABASE_URL: database.url }, (change) => behindAuditLock(database.url, change));
    });
  });
});
