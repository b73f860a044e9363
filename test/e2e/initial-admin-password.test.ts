import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_ADMIN_EMAIL } from '../../src/admin/bootstrap.ts';
import { INITIAL_PASSWORD_FILE } from '../../src/admin/initial-password-file.ts';
import { runCli } from '../support/cli-process.ts';
import { emptyDataDir, FAST_ARGON2, freePort, REPO_ROOT, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { loginAdmin, request } from '../support/http.ts';
import { createTestDatabase, describeWithPostgres, type TestDatabase } from '../support/services.ts';

const NO_ADMIN = { ADMIN_EMAIL: '', ADMIN_PASSWORD: '' };
const NEW_PASSWORD = 'a new password, long enough';

/** The file a first start wrote: private, the password alone on one line. */
function initialPassword(dataDir: string): string {
  const path = join(dataDir, INITIAL_PASSWORD_FILE);
  expect(statSync(path).mode & 0o777).toBe(0o600);
  const text = readFileSync(path, 'utf8');
  expect(text).toMatch(/^[A-Za-z0-9_-]{24}\n$/);
  // Written under a temporary name and renamed: nothing of it is left beside the file.
  expect(readdirSync(dataDir).filter((name) => name.includes(INITIAL_PASSWORD_FILE))).toEqual([INITIAL_PASSWORD_FILE]);
  return text.trim();
}

/** Started with stdout and stderr piped (a log stream, not a terminal): the log names the file, never the password. */
function expectFileNamedNotPassword(gateway: GatewayProcess, dataDir: string, password: string): void {
  expect(gateway.output()).toContain(join(dataDir, INITIAL_PASSWORD_FILE));
  expect(gateway.output()).not.toContain(password);
}

/**
 * A first start under a pseudo-terminal (util-linux `script`), as `docker run -t` gives a
 * container one: stdout and stderr on it, stdin on it too (`docker run -it`, a shell) or not.
 * Resolves with everything written to the terminal once the gateway listens, then stops it.
 */
async function firstStartOnTty(dataDir: string, stdinOnTty: boolean): Promise<string> {
  const env = {
    PATH: process.env.PATH ?? '',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    PORT: String(await freePort()),
    OPS_PORT: String(await freePort()),
    ...FAST_ARGON2,
    ...NO_ADMIN,
  };
  const command = `exec ${JSON.stringify(process.execPath)} src/main.ts${stdinOnTty ? '' : ' < /dev/null'}`;
  const child = spawn('script', ['-qfec', command, '/dev/null'], { cwd: REPO_ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let output = '';
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server listening')) resolve();
    });
    void exited.then(() => reject(new Error(`the gateway exited before listening:\n${output}`)));
  });
  try {
    await listening;
  } finally {
    // The gateway runs in script's session, not as its child's group: stopped by its own pid, from its log.
    const pid = Number(/"pid":(\d+)/.exec(output)?.[1]);
    if (pid > 0) process.kill(pid, 'SIGTERM');
    else child.kill('SIGKILL');
    await exited;
  }
  return output;
}

// Each test starts a gateway (and the CLI): generous on a loaded machine.
describe('the first admin\'s generated password', { timeout: 120_000 }, () => {
  const gateways: GatewayProcess[] = [];
  const start = async (env: Record<string, string>) => {
    const gateway = await startGateway(env);
    gateways.push(gateway);
    return gateway;
  };
  afterEach(async () => {
    await Promise.all(gateways.splice(0).map((gateway) => gateway.stop()));
  });

  it('is in DATA_DIR/initial-admin-password (0600), works for login, and is never in the output; a password change removes the file', async () => {
    const dataDir = emptyDataDir();
    const gateway = await start({ DATA_DIR: dataDir, ...NO_ADMIN });
    const password = initialPassword(dataDir);
    expectFileNamedNotPassword(gateway, dataDir, password);
    const token = await loginAdmin(gateway.url, DEFAULT_ADMIN_EMAIL, password);

    const changed = await request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token, json: { current_password: password, new_password: NEW_PASSWORD } });
    expect(changed.status, changed.text).toBe(204);
    expect(existsSync(join(dataDir, INITIAL_PASSWORD_FILE))).toBe(false);
    await loginAdmin(gateway.url, DEFAULT_ADMIN_EMAIL, NEW_PASSWORD);

    // The next change has no file to remove: it succeeds all the same.
    const again = await request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token, json: { current_password: NEW_PASSWORD, new_password: `${NEW_PASSWORD}!` } });
    expect(again.status, again.text).toBe(204);
    expect(gateway.output()).not.toContain('could not remove');
  });

  it('another admin\'s password change leaves the file; `gatehouse admin reset-password` of that admin removes it, and runs again with it gone', async () => {
    const dataDir = emptyDataDir();
    const gateway = await start({ DATA_DIR: dataDir, ...NO_ADMIN });
    const password = initialPassword(dataDir);
    expect(await gateway.stop()).toBe(0);

    const other = 'other-admin@example.test';
    const added = await runCli(['admin', 'add', '--email', other], { DATA_DIR: dataDir }, `${NEW_PASSWORD}\n`);
    expect(added.code, added.stderr).toBe(0);
    const otherReset = await runCli(['admin', 'reset-password', '--email', other], { DATA_DIR: dataDir }, `${NEW_PASSWORD}?\n`);
    expect(otherReset.code, otherReset.stderr).toBe(0);
    expect(initialPassword(dataDir)).toBe(password);

    const reset = await runCli(['admin', 'reset-password', '--email', DEFAULT_ADMIN_EMAIL], { DATA_DIR: dataDir }, `${NEW_PASSWORD}\n`);
    expect(reset.code, reset.stderr).toBe(0);
    expect(existsSync(join(dataDir, INITIAL_PASSWORD_FILE))).toBe(false);
    const again = await runCli(['admin', 'reset-password', '--email', DEFAULT_ADMIN_EMAIL], { DATA_DIR: dataDir }, `${NEW_PASSWORD}!\n`);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toBe('');

    const restarted = await start({ DATA_DIR: dataDir, ...NO_ADMIN });
    await loginAdmin(restarted.url, DEFAULT_ADMIN_EMAIL, `${NEW_PASSWORD}!`);
    // An admin exists: nothing is generated, no file comes back.
    expect(existsSync(join(dataDir, INITIAL_PASSWORD_FILE))).toBe(false);
  });

  it('is shown on an interactive terminal (stdin and stdout TTYs), never on a TTY that only records output (docker run -t, tty: true)', async () => {
    const recordedDir = emptyDataDir();
    const recorded = await firstStartOnTty(recordedDir, false);
    const hidden = initialPassword(recordedDir);
    expect(recorded).toContain(join(recordedDir, INITIAL_PASSWORD_FILE));
    expect(recorded).not.toContain(hidden);
    expect(recorded).not.toContain('Gatehouse created an admin account');

    const interactiveDir = emptyDataDir();
    const interactive = await firstStartOnTty(interactiveDir, true);
    const shown = initialPassword(interactiveDir);
    expect(interactive).toContain('Gatehouse created an admin account');
    expect(interactive).toContain(`password: ${shown}`);
  });

  describeWithPostgres('on PostgreSQL', () => {
    const databases: TestDatabase[] = [];
    afterAll(async () => {
      await Promise.all(databases.map((database) => database.drop()));
    });

    it('ADMIN_EMAIL without ADMIN_PASSWORD: the file is written to DATA_DIR (created private) by the one replica that created the admin', async () => {
      const database = await createTestDatabase();
      databases.push(database);
      // A DATA_DIR that does not exist yet: the file's directory is made 0700.
      const dataDir = join(emptyDataDir(), 'data');
      const env = { DATABASE_URL: database.url, ADMIN_EMAIL: 'first@example.test', ADMIN_PASSWORD: '' };
      const gateway = await start({ ...env, DATA_DIR: dataDir });
      expect(statSync(dataDir).mode & 0o777).toBe(0o700);
      const password = initialPassword(dataDir);
      expectFileNamedNotPassword(gateway, dataDir, password);
      const token = await loginAdmin(gateway.url, 'first@example.test', password);

      // A second replica on the same database finds the admin: it generates and writes nothing.
      const secondDir = emptyDataDir();
      const second = await start({ ...env, DATA_DIR: secondDir });
      expect(existsSync(join(secondDir, INITIAL_PASSWORD_FILE))).toBe(false);
      expect(second.output()).not.toContain('generated password');

      rmSync(join(dataDir, INITIAL_PASSWORD_FILE));
      // Gone before the change (removed by hand): the change is made all the same.
      const changed = await request(`${gateway.url}/api/v1/auth/password`, { method: 'POST', token, json: { current_password: password, new_password: NEW_PASSWORD } });
      expect(changed.status, changed.text).toBe(204);
      await loginAdmin(second.url, 'first@example.test', NEW_PASSWORD);
    });
  });
});
