import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/cli-process.ts';
import { REPO_ROOT, runGateway, startGateway, tempDataDir } from '../support/gateway-process.ts';

const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { version: string; packages: Record<string, { version: string }> };

describe('the release a gateway reports and records', { timeout: 120_000 }, () => {
  it('is 8.1.0 in package.json and its lock', () => {
    expect(manifest.version).toBe('8.1.0');
    expect(lock.version).toBe('8.1.0');
    expect(lock.packages['']?.version).toBe('8.1.0');
  });

  it('is what gatehouse --version prints and /healthz reports, and what the store records', async () => {
    const cli = await runCli(['--version']);
    expect(cli).toMatchObject({ code: 0, stdout: '8.1.0\n' });

    const dir = tempDataDir();
    const gateway = await startGateway({ DATA_DIR: dir });
    try {
      expect(await (await fetch(`${gateway.opsUrl}/healthz`)).json()).toEqual({ status: 'ok', version: '8.1.0' });
    } finally {
      await gateway.stop();
    }
    const db = new DatabaseSync(join(dir, 'gatehouse.sqlite'), { readOnly: true });
    expect(db.prepare('SELECT written_by FROM store_version').get()).toEqual({ written_by: '8.1.0' });
    db.close();
  });

  it('refuses at start a store that a newer release wrote, in one line naming both releases', async () => {
    const dir = tempDataDir();
    await (await startGateway({ DATA_DIR: dir })).stop();
    const db = new DatabaseSync(join(dir, 'gatehouse.sqlite'));
    db.prepare('UPDATE store_version SET written_by = ?').run('8.3.1');
    db.close();

    const { code, output } = await runGateway({ DATA_DIR: dir }, 30_000);
    expect(code).toBe(1);
    expect(output).toBe(
      'gatehouse: DATA_DIR: cannot open the store: the store was written by Gatehouse 8.3.1, this is Gatehouse 8.1.0: ' +
        'an older release cannot run on it (no downgrade: run 8.3.1 or later, docs/deploying.md, "Upgrading")\n',
    );
  });
});
