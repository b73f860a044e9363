import { describe, expect, it } from 'vitest';
import { inspectStoreFile } from '../../../src/store/store-file.ts';

/** A database header: page size, change counter, pages, version-valid-for. */
function header({ pageSize = 4096, counter = 7, pages = 3, validFor = 7 } = {}): Buffer {
  const bytes = Buffer.alloc(100);
  bytes.write('SQLite format 3\0', 0, 'latin1');
  bytes.writeUInt16BE(pageSize === 65_536 ? 1 : pageSize, 16);
  bytes.writeUInt32BE(counter, 24);
  bytes.writeUInt32BE(pages, 28);
  bytes.writeUInt32BE(validFor, 92);
  return bytes;
}

describe('inspectStoreFile', () => {
  it.each([
    { why: 'a whole file', bytes: header(), size: 3 * 4096, wal: 0, expected: 'whole' },
    { why: 'a file longer than its header counts (pages freed at the end)', bytes: header(), size: 4 * 4096, wal: 0, expected: 'whole' },
    { why: '64 KiB pages, written as 1', bytes: header({ pageSize: 65_536, pages: 1 }), size: 65_536, wal: 0, expected: 'whole' },
    { why: 'a page count not to be trusted (counters differ): the size is', bytes: header({ validFor: 6, pages: 9 }), size: 4096, wal: 0, expected: 'whole' },
    { why: 'short of its header with a WAL beside it: read through', bytes: header(), size: 4096, wal: 8192, expected: 'verify' },
    { why: 'empty', bytes: Buffer.alloc(0), size: 0, wal: 0, expected: /^is empty \(0 bytes\)/ },
    { why: 'cut inside the magic string', bytes: Buffer.from('SQLite f'), size: 8, wal: 0, expected: /^is truncated \(8 bytes, shorter than its header\)/ },
    { why: 'something else', bytes: Buffer.from('PGDMP\n'), size: 6, wal: 0, expected: /^is not an SQLite database: / },
    { why: 'a page size that is none', bytes: header({ pageSize: 1000 }), size: 3000, wal: 0, expected: /^is not an SQLite database \(its header names a page size of 1000\)/ },
    { why: 'cut inside a page', bytes: header(), size: 3 * 4096 - 10, wal: 0, expected: /^is truncated \(12278 bytes, not a whole number of 4096-byte pages\)/ },
    { why: 'fewer pages than its header counts', bytes: header(), size: 2 * 4096, wal: 0, expected: /^is truncated \(8192 bytes, its header says 12288\)/ },
  ])('$why', ({ bytes, size, wal, expected }) => {
    const found = inspectStoreFile(bytes, size, wal);
    if (typeof expected === 'string') expect(found).toBe(expected);
    else expect(found).toMatch(expected);
  });
});
