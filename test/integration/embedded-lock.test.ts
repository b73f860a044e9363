import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EMBEDDED_STORE_FILE, openEmbeddedDatabase } from '../../src/store/embedded.ts';
import { lockEmbeddedStore } from '../../src/store/embedded-lock.ts';

const storeDir = () => join(mkdtempSync(join(tmpdir(), 'gatehouse-lock-')), EMBEDDED_STORE_FILE);

describe('the embedded store lock', () => {
  it('is taken with this pid and removed on release', () => {
    const dir = storeDir();
    const release = lockEmbeddedStore(dir);
    expect(readFileSync(`${dir}.lock`, 'utf8')).toBe(`${process.pid}\n`);
    release();
    expect(existsSync(`${dir}.lock`)).toBe(false);
  });

  it('refuses while another live process holds it, naming that process', () => {
    const dir = storeDir();
    writeFileSync(`${dir}.lock`, `${process.ppid}\n`);
    expect(() => lockEmbeddedStore(dir)).toThrow(new RegExp(`in use by process ${process.ppid}`));
    expect(readFileSync(`${dir}.lock`, 'utf8')).toBe(`${process.ppid}\n`);
  });

  it.each([
    { holder: () => String(spawnSync(process.execPath, ['-e', '0']).pid), why: 'a process that has exited (a crash)' },
    { holder: () => String(process.pid), why: 'this very pid (a restarted container is pid 1 again)' },
    { holder: () => 'garbage', why: 'an unreadable lock file' },
  ])('takes over a lock held by $why', ({ holder }) => {
    const dir = storeDir();
    writeFileSync(`${dir}.lock`, `${holder()}\n`);
    const release = lockEmbeddedStore(dir);
    expect(readFileSync(`${dir}.lock`, 'utf8')).toBe(`${process.pid}\n`);
    release();
  });

  it('is taken by the embedded store on its file, and refuses a second opening while held', () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-lock-'));
    const lock = join(dataDir, `${EMBEDDED_STORE_FILE}.lock`);
    writeFileSync(lock, `${process.ppid}\n`);
    expect(() => openEmbeddedDatabase(dataDir)).toThrow(new RegExp(`${EMBEDDED_STORE_FILE} is in use by process ${process.ppid}`));
    writeFileSync(lock, 'garbage\n');
    const { db, release } = openEmbeddedDatabase(dataDir);
    expect(readFileSync(lock, 'utf8')).toBe(`${process.pid}\n`);
    db.close();
    release();
    expect(existsSync(lock)).toBe(false);
  });
});
