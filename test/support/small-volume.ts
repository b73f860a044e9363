import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SmallVolume {
  /** Where it is mounted. */
  dir: string;
  /** Writes a file at the volume's root until the volume has no block left. */
  fill(): void;
  /** Removes what fill() wrote: the space is free again. */
  free(): void;
  unmount(): void;
}

/**
 * A real filesystem of `bytes`, a tmpfs (the tests run as root). Returns why not when this
 * machine does not let it be mounted (no root, a container without CAP_SYS_ADMIN).
 */
export function mountSmallVolume(bytes: number): SmallVolume | string {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-volume-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes},mode=0700`, 'tmpfs', dir], { encoding: 'utf8' });
  if (mounted.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return `mount -t tmpfs failed (${mounted.error?.message ?? mounted.stderr.trim()})`;
  }
  const filler = join(dir, 'filler');
  return {
    dir,
    fill() {
      const fd = openSync(filler, 'a');
      try {
        // Large writes first, then single pages, until none fits.
        for (const size of [65_536, 4_096, 512, 1]) {
          const chunk = Buffer.alloc(size, 1);
          for (;;) {
            try {
              writeSync(fd, chunk);
            } catch (error) {
              if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
              throw error;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free: () => rmSync(filler, { force: true }),
    unmount() {
      spawnSync('umount', ['-l', dir]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
