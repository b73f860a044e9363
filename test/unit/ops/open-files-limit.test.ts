import { describe, expect, it } from 'vitest';
import { openFilesLimit, openFilesWarning } from '../../../src/ops/open-files-limit.ts';

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max processes             94000                94000                processes
Max open files            4096                 524288               files
Max locked memory         8388608              8388608              bytes
`;

describe('the open-files limit against MAX_CONNECTIONS', () => {
  it.each([
    ['a number', LIMITS, 4096],
    ['unlimited', LIMITS.replace('4096                 524288', 'unlimited            unlimited'), Infinity],
    ['no such line', 'Limit  Soft Limit\n', undefined],
  ])('reads the soft limit when it is %s', (_what, text, limit) => {
    expect(openFilesLimit(() => text)).toBe(limit);
  });

  it('reads nothing where /proc cannot be read', () => {
    expect(
      openFilesLimit(() => {
        throw new Error('ENOENT');
      }),
    ).toBeUndefined();
  });

  it.each([
    ['room to spare', 10_000, 1_048_576, false],
    ['exactly enough', 10_000, 11_024, false],
    ['too few', 10_000, 4096, true],
    ['unknown', 10_000, undefined, false],
  ])('warns only when there are %s', (_what, maxConnections, limit, warns) => {
    const warning = openFilesWarning(maxConnections, limit);
    expect(warning !== undefined).toBe(warns);
    if (warns) expect(warning).toMatch(/^MAX_CONNECTIONS is 10000 .* at least 11024, or lower MAX_CONNECTIONS to 3072$/);
  });
});
