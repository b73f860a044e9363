import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DATA_DIR_LOCK_FILE } from '../../src/store/data-dir-lock.ts';
import { openStore } from '../../src/store/open.ts';
import { IMPORT_OPEN_STORE, killHard, runStoreScript } from '../support/store-process.ts';

const dataDir = () => mkdtempSync(join(tmpdir(), 'gatehouse-lock-'));

/** Opens the store in DATA_DIR as a gateway does, creates one key, says so, and waits to be killed. */
const HOLDER = `
${IMPORT_OPEN_STORE}
const store = await openStore({ dataDir: process.env.DATA_DIR });
await store.createApiKey({ name: 'held', agentId: null, keyPrefix: 'gh_holder000', keyHash: 'h', scopes: [], expiresAt: null }, null, new Date());
process.stdout.write('done\\n');
setInterval(() => {}, 60_000);
`;

const children: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(children.splice(0).map(killHard));
});

/** Another process holding the store in `dir`. */
async function holder(dir: string): Promise<ChildProcess> {
  const child = await runStoreScript(dir, HOLDER);
  children.push(child);
  return child;
}

describe('one process per DATA_DIR, by an operating-system lock', { timeout: 60_000 }, () => {
  it('refuses a second process with one line naming DATA_DIR', async () => {
    const dir = dataDir();
    await holder(dir);
    const refused: unknown = await openStore({ dataDir: dir }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(Error);
    const { message } = refused as Error;
    expect(message).not.toContain('\n');
    expect(message).toBe(
      `${dir} is in use by another process (a running gateway, or a gatehouse command): stop it first, or share a PostgreSQL database (DATABASE_URL)`,
    );
    // The holder's lock is the kernel's: /proc/locks lists a POSIX lock on the lock file's inode.
    const inode = statSync(join(dir, DATA_DIR_LOCK_FILE)).ino;
    expect(readFileSync('/proc/locks', 'utf8')).toMatch(new RegExp(`POSIX\\s+ADVISORY\\s+WRITE\\s+\\d+\\s+\\S+:${inode} `));
  });

  it('is held until release, not until its store is garbage-collected', async () => {
    // A DatabaseSync closes itself when collected: the holder drops its store unclosed and waits
    // until the collector has taken it, then says done.
    const dropper = `
${IMPORT_OPEN_STORE}
let collected = false;
const registry = new FinalizationRegistry(() => { collected = true; });
registry.register(await openStore({ dataDir: process.env.DATA_DIR }), 'store');
while (!collected) { globalThis.gc(); await new Promise((resolve) => setImmediate(resolve)); }
process.stdout.write('done\\n');
setInterval(() => {}, 60_000);
`;
    const dir = dataDir();
    children.push(await runStoreScript(dir, dropper, ['--expose-gc']));
    await expect(openStore({ dataDir: dir })).rejects.toThrow(`${dir} is in use by another process`);
  });

  it('refuses a second opening within the same process while the first holds it', async () => {
    const dir = dataDir();
    const first = await openStore({ dataDir: dir });
    try {
      await expect(openStore({ dataDir: dir })).rejects.toThrow(`${dir} is in use by another process`);
    } finally {
      await first.close();
    }
    // Released on close: the next opening takes it.
    await (await openStore({ dataDir: dir })).close();
  });

  it('is released by the kernel when its holder is SIGKILLed: the next start takes it, with the holder’s data', async () => {
    const dir = dataDir();
    await killHard(await holder(dir));
    const store = await openStore({ dataDir: dir });
    try {
      expect((await store.listApiKeys()).map((key) => key.keyPrefix)).toEqual(['gh_holder000']);
    } finally {
      await store.close();
    }
  });

  it.each([
    { content: () => `${process.ppid}\n`, why: 'a live, unrelated process (a reused pid)' },
    { content: () => `${process.pid}\n`, why: 'this very process' },
    { content: () => 'garbage\n', why: 'nothing readable' },
  ])('is not blocked by a pid lock file of an earlier build naming $why, and removes it', async ({ content }) => {
    const dir = dataDir();
    const stale = join(dir, 'gatehouse.sqlite.lock');
    writeFileSync(stale, content());
    const store = await openStore({ dataDir: dir });
    try {
      expect(existsSync(stale)).toBe(false);
      expect(await store.countAdmins()).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('takes a lock file that holds something else than an empty database', async () => {
    const dir = dataDir();
    writeFileSync(join(dir, DATA_DIR_LOCK_FILE), '12345\n');
    await (await openStore({ dataDir: dir })).close();
    expect(statSync(join(dir, DATA_DIR_LOCK_FILE)).size).toBe(0);
  });

  it('lets `gatehouse store copy` read the store (read-only, without the lock) beside its running holder', async () => {
    const dir = dataDir();
    await holder(dir);
    const snapshot = await openStore({ dataDir: dir, readOnly: true });
    try {
      expect((await snapshot.exportData()).apiKeys.map((key) => key.keyPrefix)).toEqual(['gh_holder000']);
    } finally {
      await snapshot.close();
    }
    // The holder still holds it.
    await expect(openStore({ dataDir: dir })).rejects.toThrow('is in use by another process');
  });
});
