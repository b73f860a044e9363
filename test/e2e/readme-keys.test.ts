/* eslint-disable @typescript-eslint/no-explicit-any -- HTTP answers are read as loosely typed JSON */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform, type Platform } from '../../examples/platform/platform.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, REPO_ROOT, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { createKey, loginAdmin, request } from '../support/http.ts';
import { runProcess } from '../support/run-process.ts';

/** The README's "Managing API keys" block, exactly as a reader copies it. */
function readmeBlock(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const match = /<!-- managing-api-keys:begin -->\n```sh\n([\s\S]*?)\n```\n<!-- managing-api-keys:end -->/.exec(readme);
  if (match === null) throw new Error('README.md: no block between the managing-api-keys markers');
  return match[1]!;
}

describe('README, "Managing API keys": the block runs as pasted', { timeout: 120_000 }, () => {
  let platform: Platform;
  let gateway: GatewayProcess;

  beforeAll(async () => {
    platform = await startPlatform({ quiet: true });
    gateway = await startGateway({ UPSTREAM_URL: platform.url });
  });
  afterAll(async () => {
    await gateway?.stop();
    await platform?.close();
  });

  it('logs in, creates a key, uses it (202 upstream), revokes that key only, and the key is then refused', async () => {
    // Key 1 already exists: the block must revoke the key it created, not "id 1".
    const token = await loginAdmin(gateway.url);
    const other = (await createKey(gateway.url, token, { name: 'someone else\'s', agent_id: 7, scopes: ['events:write'] })).body;
    expect(other.id).toBe(1);

    // Only what the README says to export, in a bare environment: `set -u` catches any variable the block never sets.
    const run = await runProcess('bash', ['-c', `set -euo pipefail\n${readmeBlock()}`], { env: { PATH: process.env.PATH ?? '', GATEHOUSE_URL: gateway.url, ADMIN_EMAIL, ADMIN_PASSWORD } });
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stderr).toBe('');

    const created = JSON.parse(run.stdout.split('\n')[0]!);
    expect(created).toMatchObject({ name: 'billing sync', agent_id: 7, scopes: ['events:write'], rate_limit: { requests: 600, per_seconds: 60 } });
    expect(created.key).toMatch(/^ghk_/);
    expect(created.id).not.toBe(other.id);
    expect([...run.stdout.matchAll(/^HTTP (\d{3})$/gm)].map((match) => match[1])).toEqual(['202', '204', '401']);
    expect(run.stdout).toContain('"code":"revoked_credential"');

    // The platform received the first event, from the new key, and never the one sent after the revocation.
    expect(platform.events.map((event) => [event.agentId, event.headers['x-auth-key-id'], (event.body as any).type])).toEqual([['7', String(created.id), 'call.started']]);

    const listed = (await request(`${gateway.url}/api/v1/api-keys`, { token })).body;
    expect(listed.find((record: any) => record.id === created.id)).toMatchObject({ status: 'revoked', is_active: false });
    expect(listed.find((record: any) => record.id === other.id)).toMatchObject({ status: 'active', is_active: true });
  });
});
