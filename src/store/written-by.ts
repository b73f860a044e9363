import semver from 'semver';

/**
 * The store records the newest Gatehouse release that wrote it (docs/deploying.md,
 * "Upgrading"). A release starting on a store that a newer one has written would run on a
 * schema and on data it may not understand (a newer release may store what an older one
 * misreads or overwrites), so it is refused: there is no downgrade. Equal or newer starts, and
 * a newer one moves the record forward.
 */
export type WriterDecision = 'keep' | 'record';

/** A store written by a newer release than the one starting on it. */
export class NewerStoreError extends Error {
  readonly recorded: string;
  readonly running: string;
  constructor(recorded: string, running: string) {
    super(
      `the store was written by Gatehouse ${recorded}, this is Gatehouse ${running}: an older release cannot run on it ` +
        `(no downgrade: run ${recorded} or later, docs/deploying.md, "Upgrading")`,
    );
    this.name = 'NewerStoreError';
    this.recorded = recorded;
    this.running = running;
  }
}

/**
 * What `running` does with the store's record: `record` when there is none or it is older,
 * `keep` when it is the same release. Throws NewerStoreError when the record is newer.
 */
export function decideWriter(recorded: string | null, running: string): WriterDecision {
  const current = semver.parse(running);
  if (current === null) throw new Error(`the running version '${running}' is not a release number`);
  if (recorded === null) return 'record';
  // A record that is not a release number was not written by a release of ours: refused as newer.
  const stored = semver.parse(recorded);
  if (stored === null || semver.gt(stored, current)) throw new NewerStoreError(recorded, running);
  return semver.eq(stored, current) ? 'keep' : 'record';
}
