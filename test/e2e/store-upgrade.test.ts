import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, type CliResult } from '../support/cli-process.ts';
import { REPO_ROOT, runGateway, startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { startOrigin, type Origin } from '../support/origin.ts';

/** What test/fixtures/make-store-8.0.ts recorded of the store that Gatehouse 8.0.0 wrote. */
interface FixtureKey {
  id: number;
  name: string;
  key: string;
  key_prefix: string;
  agent_id: number | null;
  scopes: string[];
  created_at: string;
  expires_at: string | null;
}
interface Fixture {
  version: string;
  admin: { email: string; password: string; token: string };
  keys: Record<'plain' | 'agent' | 'expiring' | 'expired' | 'revoked', FixtureKey>;
  listed: Array<{ id: number; status: string; last_used_at: string | null }>;
  audit: Array<{ id: number; action: string; subject_id: string | null; at: string }>;
}

const FIXTURES = join(REPO_ROOT, 'test/fixtures');
const fixture = JSON.parse(readFileSync(join(FIXTURES, 'store-8.0.0.json'), 'utf8')) as Fixture;

/** A DATA_DIR exactly as 8.0.0 left it. */
function dataDirWrittenBy800(): string {
  const dir = tempDataDir();
  execFileSync('tar', ['-xJf', join(FIXTURES, 'store-8.0.0.tar.xz'), '-C', dir]);
  return dir;
}

/** No ADMIN_* variables: the admin is the one 8.0 stored, nothing created beside it. */
const NO_BOOTSTRAP = { ADMIN_EMAIL: '', ADMIN_PASSWORD: '' };

/** A gateway of 8.0.0 running: its lock file, holding the pid of a live process (this one). */
function lockedBy80Gateway(dir: string): void {
  writeFileSync(join(dir, 'pglite.lock'), `${process.pid}\n`);
}

describe('gatehouse store upgrade on a DATA_DIR written by Gatehouse 8.0.0', { timeout: 240_000 }, () => {
  let dir: string;
  let refusedStart: { code: number | null; output: string };
  let upgrade: CliResult;
  let origin: Origin;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    dir = dataDirWrittenBy800();
    refusedStart = await runGateway({ DATA_DIR: dir, ...NO_BOOTSTRAP }, 30_000);
    upgrade = await runCli(['store', 'upgrade', '--json'], { DATA_DIR: dir }, undefined, 180_000);
    origin = await startOrigin();
    gateway = await startGateway({ DATA_DIR: dir, UPSTREAM_URL: origin.url, ...NO_BOOTSTRAP });
  });
  afterAll(async () => {
    await gateway?.stop();
    await origin?.close();
  });

  const send = (key: string, agent: number) =>
    fetch(`${gateway.url}/api/v1/agents/${agent}/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ event: `after the upgrade, agent ${agent}` }),
    });
  const asAdmin = (path: string, token: string) => fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${token}` } });

  it('refused the start before it, in one line naming the command', () => {
    expect(refusedStart.code).toBe(1);
    const lines = refusedStart.output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^gatehouse: DATA_DIR: cannot open the store: .* holds an embedded store from Gatehouse 8\.0 .*run 'gatehouse store upgrade'/);
  });

  it('converted it in place, everything counted, the 8.0 files kept aside as they were', () => {
    expect(upgrade.code, upgrade.stderr).toBe(0);
    expect(upgrade.json()).toEqual({
      outcome: 'upgraded',
      dir,
      backup: join(dir, 'pglite-8.0-backup'),
      copied: { admins: 1, api_keys: 5, audit_events: fixture.audit.length, settings: 1 },
    });
    expect(readdirSync(dir).filter((name) => !name.startsWith('gatehouse.sqlite')).sort()).toEqual(['gatehouse.lock', 'pglite-8.0-backup']);
    // The backup is the 8.0 directory untouched: the same files as in the fixture.
    const original = execFileSync('tar', ['-tJf', join(FIXTURES, 'store-8.0.0.tar.xz')], { encoding: 'utf8' });
    const files = original.split('\n').filter((line) => line.startsWith('./pglite/') && !line.endsWith('/'));
    expect(files.length).toBeGreaterThan(100);
    for (const file of files) expect(existsSync(join(dir, 'pglite-8.0-backup', file.slice('./pglite/'.length))), file).toBe(true);
  });

  it('keeps every key working as before: unbound, bound to its agent, expiring later; the revoked and expired ones refused', async () => {
    const { plain, agent, expiring, expired, revoked } = fixture.keys;
    expect((await send(plain.key, 5)).status).toBe(200);
    expect((await send(agent.key, 7)).status).toBe(200);
    expect(await (await send(agent.key, 8)).json()).toMatchObject({ status: 403, code: 'agent_mismatch' });
    expect((await send(expiring.key, 9)).status).toBe(200);
    expect(await (await send(revoked.key, 5)).json()).toMatchObject({ status: 401, code: 'revoked_credential' });
    expect(await (await send(expired.key, 5)).json()).toMatchObject({ status: 401, code: 'expired_credential' });
    // Exactly the three allowed requests reached the platform.
    expect(origin.receivedAt('/api/v1/agents/').map((request) => request.url)).toEqual([
      '/api/v1/agents/5/events',
      '/api/v1/agents/7/events',
      '/api/v1/agents/9/events',
    ]);
  });

  it('accepts the admin token 8.0 issued (the JWT secret kept) and the admin\'s 8.0 password', async () => {
    const listed = await asAdmin('/api/v1/api-keys', fixture.admin.token);
    expect(listed.status).toBe(200);
    const keys = (await listed.json()) as Array<Record<string, unknown>>;
    for (const before of fixture.listed) {
      const key = keys.find((row) => row.id === before.id);
      const written = Object.values(fixture.keys).find((row) => row.id === before.id)!;
      expect(key, `key ${before.id}`).toMatchObject({
        status: before.status,
        name: written.name,
        key_prefix: written.key_prefix,
        agent_id: written.agent_id,
        scopes: written.scopes,
        created_at: written.created_at,
        expires_at: written.expires_at,
        enabled: true,
        rotated_from: null,
      });
      // A use of the test above may have moved it on; never backwards, never lost.
      if (before.last_used_at !== null) expect(Date.parse(String(key!.last_used_at))).toBeGreaterThanOrEqual(Date.parse(before.last_used_at));
    }

    const login = await fetch(`${gateway.url}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: fixture.admin.email, password: fixture.admin.password }),
    });
    expect(login.status).toBe(200);
    const { token } = (await login.json()) as { token: string };
    expect((await asAdmin('/api/v1/api-keys', token)).status).toBe(200);
  });

  it('keeps the audit trail 8.0 wrote, ids and times as they were, with the new events after it', async () => {
    const response = await asAdmin('/api/v1/audit-events?limit=100', fixture.admin.token);
    expect(response.status).toBe(200);
    const events = (await response.json()) as Array<{ id: number; action: string; subject_id: string | null; at: string }>;
    const old = events.filter((event) => event.id <= fixture.audit.length);
    expect(old.map(({ id, action, subject_id, at }) => ({ id, action, subject_id, at }))).toEqual(
      fixture.audit.map(({ id, action, subject_id, at }) => ({ id, action, subject_id, at })),
    );
    expect(events.some((event) => event.id > fixture.audit.length && event.action === 'login_succeeded')).toBe(true);
  });

  it('reports 8.1.0 on /healthz, and a second run finds nothing to upgrade', async () => {
    expect(await (await fetch(`${gateway.opsUrl}/healthz`)).json()).toEqual({ status: 'ok', version: '8.1.0' });
    await gateway.stop();
    const again = await runCli(['store', 'upgrade'], { DATA_DIR: dir });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`${dir} holds this build's store already: nothing to upgrade\n`);
  });
});

/**
 * An install without the optional dependency (`npm ci --omit=optional`): the package fails to
 * resolve as a missing one does, through Node's module hooks, loaded before the CLI.
 */
const WITHOUT_PGLITE = `--import=data:text/javascript,${encodeURIComponent(`
import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, next) {
    if (specifier !== '@electric-sql/pglite') return next(specifier, context);
    throw Object.assign(new Error("Cannot find package '" + specifier + "'"), { code: 'ERR_MODULE_NOT_FOUND' });
  },
});
`)}`;

/** Writes 8.0's lock holding the CLI's own pid before the CLI runs, through a module loaded first. */
function lockedWithOwnPid(lock: string): string {
  return `--import=data:text/javascript,${encodeURIComponent(
    `import { writeFileSync } from 'node:fs'; writeFileSync(${JSON.stringify(lock)}, process.pid + '\\n');`,
  )}`;
}

describe('gatehouse store upgrade refuses', { timeout: 240_000 }, () => {
  it('without its optional dependency: one line saying how to install it, nothing changed', async () => {
    const dir = dataDirWrittenBy800();
    const result = await runCli(['store', 'upgrade'], { DATA_DIR: dir, NODE_OPTIONS: WITHOUT_PGLITE });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "gatehouse: reading an 8.0 store needs the optional package @electric-sql/pglite: install it with 'npm install --no-save @electric-sql/pglite@0.5.16' and run the command again\n",
    );
    expect(readdirSync(dir)).toEqual(['pglite']);
  });

  it('while a process it can see holds 8.0\'s lock, --force or not, and changes nothing', async () => {
    const dir = dataDirWrittenBy800();
    lockedBy80Gateway(dir);
    const lock = join(dir, 'pglite.lock');
    for (const args of [['store', 'upgrade'], ['store', 'upgrade', '--force']]) {
      const result = await runCli(args, { DATA_DIR: dir });
      expect(result.code, args.join(' ')).toBe(1);
      expect(result.stderr).toBe(
        `gatehouse: DATA_DIR: ${dir} is in use by process ${process.pid} (a Gatehouse 8.0 gateway?): stop it, then run 'gatehouse store upgrade' again ` +
          `(if process ${process.pid} is no gateway, remove ${lock} first)\n`,
      );
      expect(readdirSync(dir).sort()).toEqual(['pglite', 'pglite.lock']);
      expect(readFileSync(lock, 'utf8')).toBe(`${process.pid}\n`);
    }
  });

  it('a lock naming its own pid (a gateway that was PID 1 in its container, as the command is in its own): until --force', async () => {
    const dir = dataDirWrittenBy800();
    const lock = join(dir, 'pglite.lock');
    const result = await runCli(['store', 'upgrade', '--json'], { DATA_DIR: dir, NODE_OPTIONS: lockedWithOwnPid(lock) });
    const pid = readFileSync(lock, 'utf8').trim();
    expect(result.code).toBe(1);
    expect(result.json()).toMatchObject({ error: { code: 'store_in_use' } });
    expect(result.stderr).toBe(
      `gatehouse: DATA_DIR: ${dir} is locked by process ${pid}, this command's own pid here (${lock}): ` +
        'a Gatehouse 8.0 gateway in another container or PID namespace, or one that stopped without unlocking; ' +
        `stop 8.0, and once you know it is stopped run 'gatehouse store upgrade --force' (or remove ${lock})\n`,
    );
    expect(readdirSync(dir).sort()).toEqual(['pglite', 'pglite.lock']);
  });

  it('a lock naming a process it cannot see: until --force, which converts and releases the lock', async () => {
    const dir = dataDirWrittenBy800();
    const lock = join(dir, 'pglite.lock');
    // No process has a pid as high as pid_max: kill(pid, 0) answers ESRCH, as it does for a
    // gateway in another PID namespace.
    const invisible = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
    writeFileSync(lock, `${invisible}\n`);
    const refused = await runCli(['store', 'upgrade'], { DATA_DIR: dir });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`${dir} is locked by process ${invisible}, which this command cannot see (${lock}): `);
    expect(refused.stderr).toContain(`once you know it is stopped run 'gatehouse store upgrade --force' (or remove ${lock})`);
    expect(readdirSync(dir).sort()).toEqual(['pglite', 'pglite.lock']);
    expect(readFileSync(lock, 'utf8')).toBe(`${invisible}\n`);

    const forced = await runCli(['store', 'upgrade', '--force', '--json'], { DATA_DIR: dir }, undefined, 180_000);
    expect(forced.code, forced.stderr).toBe(0);
    expect(forced.json()).toMatchObject({ outcome: 'upgraded', copied: { admins: 1, api_keys: 5 } });
    expect(readdirSync(dir).filter((name) => !name.startsWith('gatehouse.sqlite')).sort()).toEqual(['pglite-8.0-backup']);
  });

  it('beside a gatehouse.sqlite or an earlier backup: never overwritten, nothing changed', async () => {
    const mixed = dataDirWrittenBy800();
    writeFileSync(join(mixed, 'gatehouse.sqlite'), 'kept as it is');
    const both = await runCli(['store', 'upgrade', '--json'], { DATA_DIR: mixed });
    expect(both.code).toBe(1);
    expect(both.json()).toMatchObject({ error: { code: 'mixed_store' } });
    expect(both.stderr).toContain(`move ${join(mixed, 'gatehouse.sqlite')} away, then run 'gatehouse store upgrade' again`);
    expect(readFileSync(join(mixed, 'gatehouse.sqlite'), 'utf8')).toBe('kept as it is');
    expect(readdirSync(mixed).sort()).toEqual(['gatehouse.sqlite', 'pglite']);

    const backedUp = dataDirWrittenBy800();
    mkdirSync(join(backedUp, 'pglite-8.0-backup'));
    const again = await runCli(['store', 'upgrade', '--json'], { DATA_DIR: backedUp });
    expect(again.code).toBe(1);
    expect(again.json()).toMatchObject({ error: { code: 'backup_exists' } });
    expect(readdirSync(backedUp).sort()).toEqual(['pglite', 'pglite-8.0-backup']);
  });

  it('a DATA_DIR without an 8.0 store, and a PostgreSQL store, which migrates at start', async () => {
    const empty = tempDataDir();
    const none = await runCli(['store', 'upgrade'], { DATA_DIR: empty });
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(`gatehouse: DATA_DIR: ${empty} holds no Gatehouse 8.0 store (no ${join(empty, 'pglite')} directory): check DATA_DIR\n`);
    expect(readdirSync(empty)).toEqual([]);

    const postgres = await runCli(['store', 'upgrade', '--json'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
    expect(postgres.code).toBe(1);
    expect(postgres.json()).toMatchObject({ error: { code: 'nothing_to_upgrade' } });
  });
});
