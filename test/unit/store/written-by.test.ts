import { describe, expect, it } from 'vitest';
import { decideWriter, NewerStoreError } from '../../../src/store/written-by.ts';

describe('decideWriter: what a starting release does with the store\'s record of its newest writer', () => {
  const cases: Array<{ description: string; recorded: string | null; running: string; expected: 'keep' | 'record' | 'refused' }> = [
    { description: 'no record yet (a new store, or one of 8.0): recorded', recorded: null, running: '8.1.0', expected: 'record' },
    { description: 'the same release: kept as it is', recorded: '8.1.0', running: '8.1.0', expected: 'keep' },
    { description: 'an older release wrote it: moved forward', recorded: '8.0.0', running: '8.1.0', expected: 'record' },
    { description: 'an older patch release: moved forward', recorded: '8.1.0', running: '8.1.1', expected: 'record' },
    { description: 'compared as numbers, not as text (8.10 is newer than 8.9)', recorded: '8.9.0', running: '8.10.0', expected: 'record' },
    { description: 'a newer minor release wrote it: refused', recorded: '8.2.0', running: '8.1.0', expected: 'refused' },
    { description: 'a newer patch release wrote it: refused', recorded: '8.1.1', running: '8.1.0', expected: 'refused' },
    { description: 'a newer major release wrote it: refused', recorded: '9.0.0', running: '8.1.0', expected: 'refused' },
    { description: 'a pre-release of the running one is older than it', recorded: '8.1.0-rc.1', running: '8.1.0', expected: 'record' },
    { description: 'a record that is no release number: refused, not guessed at', recorded: 'banana', running: '8.1.0', expected: 'refused' },
  ];
  for (const { description, recorded, running, expected } of cases) {
    it(description, () => {
      if (expected !== 'refused') {
        expect(decideWriter(recorded, running)).toBe(expected);
        return;
      }
      expect(() => decideWriter(recorded, running)).toThrow(NewerStoreError);
    });
  }

  it('refuses in one line naming both releases', () => {
    const error = (() => {
      try {
        decideWriter('8.2.0', '8.1.0');
      } catch (caught) {
        return caught as NewerStoreError;
      }
      throw new Error('not refused');
    })();
    expect(error.message).toBe(
      'the store was written by Gatehouse 8.2.0, this is Gatehouse 8.1.0: an older release cannot run on it ' +
        '(no downgrade: run 8.2.0 or later, docs/deploying.md, "Upgrading")',
    );
    expect(error).toMatchObject({ recorded: '8.2.0', running: '8.1.0' });
  });
});
