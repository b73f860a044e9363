import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { lockEmbeddedStore } from '../../src/store/embedded-lock.ts';

const storeDir = () => join(mkdtempSync(join(tmpdir(), 'gatehouse-lock-')), 'pglite');

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
});
