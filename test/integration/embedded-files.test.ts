import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { DATA_DIR_LOCK_FILE } from '../../src/store/data-dir-lock.ts';
import { EMBEDDED_STORE_FILE } from '../../src/store/embedded.ts';
import { openStore } from '../../src/store/open.ts';
import type { Store } from '../../src/store/store.ts';
import { REPO_ROOT } from '../support/gateway-process.ts';
import { IMPORT_OPEN_STORE, killHard, runStoreScript } from '../support/store-process.ts';

const dataDir = () => mkdtempSync(join(tmpdir(), 'gatehouse-files-'));
const modeOf = (path: string) => statSync(path).mode & 0o777;

async function createKeys(store: Store, count: number, from = 0): Promise<void> {
  for (let i = from; i < from + count; i++) {
    const created = await store.createApiKey(
      { name: `key ${i}`, agentId: null, keyPrefix: `gh_files${String(i).padStart(4, '0')}`, keyHash: 'h'.repeat(90), scopes: ['events:write'], expiresAt: null },
      null,
      new Date(),
    );
    if (!created.ok) throw new Error(created.reason);
  }
}

/** Half the file, in whole 4 KiB pages. */
const halfPages = (size: number) => Math.floor(size / 8192) * 4096;

/** A closed store of `count` keys, its WAL checkpointed into the file. */
async function storeWithKeys(count: number): Promise<string> {
  const dir = dataDir();
  const store = await openStore({ dataDir: dir });
  await createKeys(store, count);
  await store.close();
  return dir;
}

describe('the embedded store’s files are private to their owner', () => {
  it('creates DATA_DIR 0700 and every file it writes 0600, with no warning', async () => {
    const dir = join(dataDir(), 'new');
    const warnings: string[] = [];
    const store = await openStore({ dataDir: dir, warn: (message) => warnings.push(message) });
    try {
      await createKeys(store, 1);
      expect(modeOf(dir)).toBe(0o700);
      const files = readdirSync(dir).toSorted();
      expect(files).toEqual([DATA_DIR_LOCK_FILE, EMBEDDED_STORE_FILE, `${EMBEDDED_STORE_FILE}-shm`, `${EMBEDDED_STORE_FILE}-wal`]);
      expect(files.map((file) => [file, modeOf(join(dir, file))])).toEqual(files.map((file) => [file, 0o600]));
      expect(warnings).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('tightens a DATA_DIR restored open to others, with one warning line naming what was looser', async () => {
    const dir = await storeWithKeys(1);
    chmodSync(dir, 0o755);
    chmodSync(join(dir, EMBEDDED_STORE_FILE), 0o644);
    chmodSync(join(dir, DATA_DIR_LOCK_FILE), 0o666);
    writeFileSync(join(dir, 'initial-admin-password'), 'x', { mode: 0o640 });
    chmodSync(join(dir, 'initial-admin-password'), 0o640);
    const warnings: string[] = [];
    const store = await openStore({ dataDir: dir, warn: (message) => warnings.push(message) });
    try {
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).not.toContain('\n');
      expect(warnings[0]).toMatch(new RegExp(`^DATA_DIR: ${dir} was open to other users, now private to its owner \\(directory 0700, files 0600\\): `));
      for (const named of ['the directory (was 0755)', `${EMBEDDED_STORE_FILE} (was 0644)`, `${DATA_DIR_LOCK_FILE} (was 0666)`, 'initial-admin-password (was 0640)']) {
        expect(warnings[0]).toContain(named);
      }
      expect(modeOf(dir)).toBe(0o700);
      for (const file of readdirSync(dir)) expect([file, modeOf(join(dir, file))]).toEqual([file, 0o600]);
      expect((await store.listApiKeys()).length).toBe(1);
    } finally {
      await store.close();
    }
    // Private now: the next start says nothing.
    const again: string[] = [];
    await (await openStore({ dataDir: dir, warn: (message) => again.push(message) })).close();
    expect(again).toEqual([]);
  });

  // Running a process as another user takes root, which the tests run as.
  it.skipIf(process.getuid?.() !== 0)('leaves what another user owns as it is and names it in the same line', () => {
    // Run as `nobody` in a directory of root's: the directory and one file are not its to change.
    const dir = dataDir();
    chmodSync(dir, 0o777);
    writeFileSync(join(dir, 'roots'), 'x', { mode: 0o644 });
    chmodSync(join(dir, 'roots'), 0o644);
    const module = pathToFileURL(join(REPO_ROOT, 'src/store/data-dir-permissions.ts')).href;
    const script = `import { writeFileSync } from 'node:fs';
      import { tightenDataDir } from ${JSON.stringify(module)};
      writeFileSync(${JSON.stringify(join(dir, 'mine'))}, 'x', { mode: 0o644 });
      process.stdout.write(tightenDataDir(${JSON.stringify(dir)}));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { uid: 65534, gid: 65534, encoding: 'utf8' });
    expect([run.status, run.stderr]).toEqual([0, '']);
    expect(run.stdout).toBe(
      `DATA_DIR: ${dir} was open to other users, now private to its owner (directory 0700, files 0600): mine (was 0644); ` +
        "not this user's to change, left open: the directory (0777), roots (0644)",
    );
    expect([modeOf(dir), modeOf(join(dir, 'roots')), modeOf(join(dir, 'mine'))]).toEqual([0o777, 0o644, 0o600]);
  });

  it('takes permission away and never adds it: a 0400 file stays 0400', async () => {
    const dir = await storeWithKeys(1);
    writeFileSync(join(dir, 'notes'), 'x');
    chmodSync(join(dir, 'notes'), 0o400);
    await (await openStore({ dataDir: dir })).close();
    expect(modeOf(join(dir, 'notes'))).toBe(0o400);
  });
});

describe('a store file that is not whole is refused at start, never replaced by a new, empty store', () => {
  const RESTORE = 'restore it from a backup, or move it away to start a new, empty store';

  it.each([
    { why: 'zero-length', cut: () => 0, says: () => `is empty (0 bytes), which no store SQLite has written is: ${RESTORE}` },
    { why: 'cut inside its header', cut: () => 50, says: () => `is truncated (50 bytes, shorter than its header): ${RESTORE}` },
    { why: 'cut inside a page', cut: (size: number) => size - 100, says: (_: number, to: number) => `is truncated (${to} bytes, not a whole number of 4096-byte pages): ${RESTORE}` },
    { why: 'cut to fewer pages than its header counts', cut: halfPages, says: (size: number, to: number) => `is truncated (${to} bytes, its header says ${size}): ${RESTORE}` },
  ])('$why: one line naming the file, and the file left as it was', async ({ cut, says }) => {
    const dir = await storeWithKeys(200);
    const file = join(dir, EMBEDDED_STORE_FILE);
    const size = statSync(file).size;
    const to = cut(size);
    truncateSync(file, to);
    const before = readFileSync(file);
    const refused: unknown = await openStore({ dataDir: dir }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toBe(`${file} ${says(size, to)}`);
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(existsSync(`${file}-wal`)).toBe(false);
    // `gatehouse store copy` refuses it as well.
    await expect(openStore({ dataDir: dir, readOnly: true })).rejects.toThrow(`${file} ${says(size, to)}`);
  });

  it('cut while a WAL from a crash is beside it: read through at start, and refused as damaged', { timeout: 60_000 }, async () => {
    const dir = await storeWithKeys(200);
    const file = join(dir, EMBEDDED_STORE_FILE);
    const size = statSync(file).size;
    // A process killed after one more commit leaves it in its WAL.
    const script = `${IMPORT_OPEN_STORE}
      const store = await openStore({ dataDir: process.env.DATA_DIR });
      await store.getOrCreateSetting('crash', 'x');
      process.stdout.write('done\\n');
      setInterval(() => {}, 60_000);`;
    await killHard(await runStoreScript(dir, script));
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(0);
    truncateSync(file, halfPages(size));
    await expect(openStore({ dataDir: dir })).rejects.toThrow(new RegExp(`^${file} is damaged or truncated \\(SQLite: .*\\): ${RESTORE}$`));
  });

  it('a WAL without its store file: refused, rather than a new store that would take that WAL for its own', async () => {
    const dir = dataDir();
    const file = join(dir, EMBEDDED_STORE_FILE);
    writeFileSync(`${file}-wal`, Buffer.alloc(4096));
    await expect(openStore({ dataDir: dir })).rejects.toThrow(`${file} is missing but its ${file}-wal is there`);
    expect(existsSync(file)).toBe(false);
  });
});
