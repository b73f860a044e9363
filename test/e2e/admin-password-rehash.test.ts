import { afterEach, describe, expect, it } from 'vitest';
import { argon2ParamsOf } from '../../src/crypto/argon2-params.ts';
import { openStore } from '../../src/store/open.ts';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startGateway, tempDataDir, type GatewayProcess } from '../support/gateway-process.ts';
import { loginAdmin } from '../support/http.ts';

async function storedHash(dataDir: string): Promise<string> {
  const store = await openStore({ dataDir });
  try {
    return (await store.findAdminByEmail(ADMIN_EMAIL))!.passwordHash;
  } finally {
    await store.close();
  }
}

describe('argon2id settings changed: the admin hash is upgraded at the next successful login', () => {
  let gateway: GatewayProcess | undefined;
  afterEach(async () => {
    await gateway?.stop();
  });

  it('restarted with another ARGON2_TIME_COST, a login rewrites the stored hash with it, and the password still works', { timeout: 90_000 }, async () => {
    const DATA_DIR = tempDataDir();
    gateway = await startGateway({ DATA_DIR, ARGON2_TIME_COST: '1' });
    await gateway.stop();
    const created = await storedHash(DATA_DIR);
    expect(argon2ParamsOf(created)?.timeCost).toBe(1);

    gateway = await startGateway({ DATA_DIR, ARGON2_TIME_COST: '3' });
    // Starting alone changes nothing: ADMIN_PASSWORD never overwrites an existing admin's hash.
    await gateway.stop();
    expect(await storedHash(DATA_DIR)).toBe(created);

    gateway = await startGateway({ DATA_DIR, ARGON2_TIME_COST: '3' });
    await loginAdmin(gateway.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await gateway.stop();
    const upgraded = await storedHash(DATA_DIR);
    expect(argon2ParamsOf(upgraded)).toEqual({ ...argon2ParamsOf(created), timeCost: 3 });

    gateway = await startGateway({ DATA_DIR, ARGON2_TIME_COST: '3' });
    await loginAdmin(gateway.url, ADMIN_EMAIL, ADMIN_PASSWORD);
    await gateway.stop();
    expect(await storedHash(DATA_DIR)).toBe(upgraded);
    gateway = undefined;
  });
});
