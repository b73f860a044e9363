import { describe, expect, it } from 'vitest';
import { toGatewayError } from '../../../src/http/error-handler.ts';
import type { Store } from '../../../src/store/store.ts';
import { guardStore, isStoreUnavailable, StoreUnavailableError } from '../../../src/store/unavailable.ts';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('isStoreUnavailable', () => {
  it.each([
    ['a refused connection', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['a reset connection', withCode('read ECONNRESET', 'ECONNRESET')],
    ['a dropped database', withCode('database "gh" does not exist', '3D000')],
    ['an administrator shutdown', withCode('terminating connection due to administrator command', '57P01')],
    ['a connection exception', withCode('connection failure', '08006')],
    ['too many connections', withCode('sorry, too many clients already', '53300')],
    ['a terminated connection', new Error('Connection terminated unexpectedly')],
    ['a pool timeout', new Error('timeout exceeded when trying to connect')],
    ['every address refused', new AggregateError([withCode('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], '')],
  ])('is true for %s', (_what, error) => {
    expect(isStoreUnavailable(error)).toBe(true);
  });

  it.each([
    ['a unique violation', withCode('duplicate key value violates unique constraint', '23505')],
    ['a syntax error', withCode('syntax error at or near "SELEC"', '42601')],
    ['a plain bug', new TypeError('cannot read properties of undefined')],
    ['a non-error', 'ECONNREFUSED'],
  ])('is false for %s', (_what, error) => {
    expect(isStoreUnavailable(error)).toBe(false);
  });
});

describe('guardStore', () => {
  const failing = (error: unknown) =>
    ({
      kind: 'postgres',
      listApiKeys: async () => {
        throw error;
      },
      ping: async () => {},
    }) as unknown as Store;

  it('turns an unreachable database into StoreUnavailableError, which HTTP answers with 503 store_unavailable', async () => {
    const store = guardStore(failing(withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')));
    const error = await store.listApiKeys().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StoreUnavailableError);
    const mapped = toGatewayError(error as Error);
    expect([mapped.code, mapped.status]).toEqual(['store_unavailable', 503]);
    expect(mapped.message).not.toContain('5432');
  });

  it('passes other errors, values and properties through unchanged', async () => {
    const bug = withCode('syntax error', '42601');
    const store = guardStore(failing(bug));
    await expect(store.listApiKeys()).rejects.toBe(bug);
    await expect(store.ping()).resolves.toBeUndefined();
    expect(store.kind).toBe('postgres');
  });
});
