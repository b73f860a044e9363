import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openEmbedded } from '../../src/store/embedded.ts';

describe('the embedded store (PGlite)', () => {
  it('runs with 8 MB of shared buffers, not PostgreSQL\'s 128 MB, and still answers queries', async () => {
    const db = await openEmbedded(join(mkdtempSync(join(tmpdir(), 'gatehouse-embedded-')), 'pglite'));
    try {
      expect(await db.query<{ shared_buffers: string }>('SHOW shared_buffers')).toEqual([{ shared_buffers: '8MB' }]);
      expect(await db.query<{ n: number }>('SELECT count(*)::int AS n FROM generate_series(1, 1000)')).toEqual([{ n: 1000 }]);
    } finally {
      await db.close();
    }
  });
});
