import { describe, expect, it } from 'vitest';
import { loadPglite, PGLITE_PACKAGE, PGLITE_VERSION, PgliteMissingError } from '../../../src/store/pglite-reader.ts';

describe('loadPglite, the optional dependency of gatehouse store upgrade', () => {
  it('says in one line how to install it when it is missing', async () => {
    const error: unknown = await loadPglite('@electric-sql/pglite-not-installed').catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(PgliteMissingError);
    expect((error as Error).message).toBe(
      "reading an 8.0 store needs the optional package @electric-sql/pglite: install it with 'npm install --no-save @electric-sql/pglite@0.5.16' and run the command again",
    );
  });

  it('names the version package.json pins, the one 8.0.0 wrote its stores with', async () => {
    const { default: manifest } = await import('../../../package.json', { with: { type: 'json' } });
    expect(manifest.optionalDependencies[PGLITE_PACKAGE]).toBe(PGLITE_VERSION);
    expect(PGLITE_VERSION).toBe('0.5.16');
  });
});
