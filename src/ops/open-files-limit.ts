import { readFileSync } from 'node:fs';

/**
 * File descriptors the gateway needs beyond its client connections: the upstream pools, the
 * store, Redis, the ops listener, logs. A guess with room to spare, not a measurement.
 */
const RESERVED_DESCRIPTORS = 1_024;

/**
 * The process's soft limit on open files (Linux `/proc/self/limits`), or undefined where it
 * cannot be read. When the limit is below `MAX_CONNECTIONS` plus what the gateway needs for
 * itself, accepting fails with EMFILE before `MAX_CONNECTIONS` is reached, and then nothing,
 * not even the ops port's probes, can be accepted: worth a warning at start.
 */
export function openFilesLimit(read: () => string = () => readFileSync('/proc/self/limits', 'utf8')): number | undefined {
  let text: string;
  try {
    text = read();
  } catch {
    return undefined;
  }
  const match = /^Max open files\s+(\d+|unlimited)\s/m.exec(text);
  if (!match) return undefined;
  return match[1] === 'unlimited' ? Infinity : Number(match[1]);
}

/** A warning to log at start, or undefined when the limit leaves room for `maxConnections`. */
export function openFilesWarning(maxConnections: number, limit: number | undefined): string | undefined {
  if (limit === undefined || limit >= maxConnections + RESERVED_DESCRIPTORS) return undefined;
  return (
    `MAX_CONNECTIONS is ${maxConnections} but the process may open only ${limit} files: ` +
    `raise the limit (ulimit -n, or the container runtime's nofile) to at least ${maxConnections + RESERVED_DESCRIPTORS}, ` +
    `or lower MAX_CONNECTIONS to ${Math.max(1, limit - RESERVED_DESCRIPTORS)}`
  );
}
