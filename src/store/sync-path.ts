import { closeSync, fsyncSync, openSync } from 'node:fs';

/**
 * fsync() of a file or a directory: a directory's, after a rename into it, makes the rename
 * itself durable (a crash then finds the new name or the old, never neither).
 */
export function syncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
