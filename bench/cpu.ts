import { readFileSync } from 'node:fs';

/**
 * How much of the machine other processes used during a measurement: the cores are shared (with
 * other work on a developer's machine or CI), and a run that competed for them shows it here
 * instead of passing for a slow gateway. Linux only (/proc); elsewhere undefined.
 */
export interface CpuSnapshot {
  /** Jiffies of all cores: busy, and in all. */
  busy: number;
  total: number;
  /** Jiffies of the benchmark itself, its waited-for children (wrk) and the servers it started. */
  ours: number;
}

function jiffiesOf(pid: number | 'self'): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may hold spaces) start after the last ')'.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // utime, stime, cutime, cstime are fields 14–17 of stat, 12–15 after the command.
    return Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  } catch {
    return 0;
  }
}

export function cpuSnapshot(pids: readonly number[]): CpuSnapshot | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
    const values = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = (values[3] ?? 0) + (values[4] ?? 0);
    const total = values.slice(0, 8).reduce((sum, value) => sum + value, 0);
    const ours = jiffiesOf('self') + pids.reduce((sum, pid) => sum + jiffiesOf(pid), 0);
    return { busy: total - idle, total, ours };
  } catch {
    return undefined;
  }
}

/** Share of the whole machine (all cores, %) used by other processes between two snapshots. */
export function foreignCpu(before: CpuSnapshot | undefined, after: CpuSnapshot | undefined): number | undefined {
  if (before === undefined || after === undefined || after.total <= before.total) return undefined;
  const foreign = after.busy - before.busy - (after.ours - before.ours);
  return Math.max(0, (foreign / (after.total - before.total)) * 100);
}

/** Clock ticks per second of /proc's CPU times (USER_HZ): 100 on every Linux build in use. */
const TICKS_PER_SECOND = 100;

/** CPU time (user + system, milliseconds) one process has used so far; undefined without /proc. */
export function processCpuMs(pid: number): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/**
 * Waits until `pid` has used less than `share` of one core for half a second (at most
 * `timeoutMs`; where there is no /proc, returns at once). A freshly started gateway may keep a
 * core busy after it answers: V8 optimises code on background threads (on PGlite, compiling its
 * WASM took seconds). Measured then, that work would pass for the gateway's latency.
 */
export async function quiescent(pid: number, share = 0.1, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let before = processCpuMs(pid);
  while (before !== undefined && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = processCpuMs(pid);
    if (after === undefined || after - before < 500 * share) return;
    before = after;
  }
}
