import type { LoadResult } from './load.ts';

/** A scenario's runs (one per round) and what the table shows of them. */
export interface Row {
  name: string;
  what: string;
  runs: LoadResult[];
  /** Means over the runs. */
  rps: number;
  p50: number;
  p99: number;
  p999: number;
  /** (max − min) / mean of the runs' req/s, in %: the drift between rounds. */
  spread: number;
  non2xx: number;
  errors: number;
  /** Mean share of the machine (%) used by other processes during the runs, where known. */
  foreignCpu: number | undefined;
  /** Mean CPU µs per request of the server under test, where known. */
  cpuPerRequestUs: number | undefined;
  /** What one request of the scenario answered before the load (status and problem code). */
  probe: string;
  note?: string;
}

export interface RssFigure {
  keys: number;
  /** RSS after a full GC, before any key is used (once start-up's RSS has settled), and V8's live heap then. */
  idleMb: number;
  /** The highest RSS of the process, start-up included (VmHWM): what a container's memory limit must allow. */
  peakMb: number;
  idleHeapUsedMb: number;
  /** RSS as found 3 s after the last key's first use: the figure the target is judged on. */
  cachedMb: number;
  /** RSS after a full GC with every key cached, and V8's live heap, reserved heap and external buffers then. */
  afterGcMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  verifiesOnRepeat: number;
}

/** Starts of the gateway on a fresh embedded store: to `/readyz` 200, and the peak RSS in the first 10 s. */
export interface StartupFigure {
  runs: number;
  readyMsMedian: number;
  readyMsMax: number;
  peakMbMedian: number;
  peakMbMax: number;
}

/** Figures measured outside the load rows. */
export interface Extras {
  startup?: StartupFigure;
  argon2?: { params: string; verifyMsMedian: number; verifyMsP90: number };
  storm?: { keys: number; requestsPerKey: number; verifies: number; perKey: number; statuses: Record<string, number> };
  cold?: { keys: number; verifies: number; perKey: number; verifiesPerSecond: number; p50: number; p99: number; statuses: Record<string, number> };
  invalid?: {
    validRate: number;
    attackRate: number;
    baselineP99: number;
    /** The valid stream's p99 while the same attack went to the upstream instead of the gateway. */
    controlP99: number;
    p99: number;
    p50: number;
    p999: number;
    validNon2xx: number;
    attackAchieved: number;
    attackStatuses: Record<string, number>;
    argon2DuringAttack: number;
  };
  /** By store: `embedded` (SQLite in the gateway process, the default) and `postgres`. */
  rss?: { embedded?: RssFigure; postgres?: RssFigure };
  stale?: { replicas: number; accepted: number; attempts: number; note?: string };
  skipped?: Record<string, string>;
}

export function rowOf(name: string, what: string, runs: LoadResult[], probe: string, note?: string): Row {
  const mean = (pick: (run: LoadResult) => number) => runs.reduce((sum, run) => sum + pick(run), 0) / runs.length;
  const rates = runs.map((run) => run.rps);
  const rps = mean((run) => run.rps);
  return {
    name,
    what,
    runs,
    rps,
    p50: mean((run) => run.p50),
    p99: mean((run) => run.p99),
    p999: mean((run) => run.p999),
    spread: runs.length > 1 ? ((Math.max(...rates) - Math.min(...rates)) / rps) * 100 : 0,
    non2xx: runs.reduce((sum, run) => sum + run.non2xx, 0),
    foreignCpu: runs.every((run) => run.foreignCpu !== undefined) ? mean((run) => run.foreignCpu!) : undefined,
    cpuPerRequestUs: runs.every((run) => run.cpuPerRequestUs !== undefined) ? mean((run) => run.cpuPerRequestUs!) : undefined,
    errors: runs.reduce((sum, run) => sum + run.errors, 0),
    probe,
    ...(note === undefined ? {} : { note }),
  };
}

/** One target of docs/performance.md: where its figure comes from, the bound, and the row it annotates. */
interface TargetSpec {
  figure: string;
  row?: string;
  target: string;
  measure(rows: ReadonlyMap<string, Row>, extras: Extras): { value: number; shown: string } | { missing: string };
  /** Absent: a figure reported beside a target, with none of its own. */
  ok?(value: number): boolean;
}

export interface TargetResult {
  figure: string;
  row?: string;
  target: string;
  measured: string;
  met: boolean | undefined;
}

const fixed = (value: number, digits = 2) => value.toFixed(digits);

/** A load row counts only if every answer was a 2xx: a refused request is not throughput. */
function usable(rows: ReadonlyMap<string, Row>, name: string): Row | string {
  const row = rows.get(name);
  if (row === undefined) return `${name} not run`;
  if (row.non2xx > 0 || row.errors > 0) return `${name}: ${row.non2xx} non-2xx, ${row.errors} errors (probe: ${row.probe})`;
  return row;
}

function ratio(rows: ReadonlyMap<string, Row>, over: string, under: string) {
  const a = usable(rows, over);
  const b = usable(rows, under);
  if (typeof a === 'string') return { missing: a };
  if (typeof b === 'string') return { missing: b };
  const value = a.rps / b.rps;
  return { value, shown: `${fixed(value)} (${Math.round(a.rps)} / ${Math.round(b.rps)})` };
}

export const TARGETS: readonly TargetSpec[] = [
  { figure: 'events-cached / bare-proxy', row: 'events-cached', target: '≥ 1.5', measure: (rows) => ratio(rows, 'events-cached', 'bare-proxy'), ok: (v) => v >= 1.5 },
  { figure: 'events-cached / node-floor', row: 'events-cached', target: '≥ 0.85', measure: (rows) => ratio(rows, 'events-cached', 'node-floor'), ok: (v) => v >= 0.85 },
  {
    figure: 'events-cached p99 − node-floor p99',
    row: 'events-cached',
    target: '≤ 1 ms',
    measure: (rows) => {
      const a = usable(rows, 'events-cached');
      const b = usable(rows, 'node-floor');
      if (typeof a === 'string') return { missing: a };
      if (typeof b === 'string') return { missing: b };
      const value = a.p99 - b.p99;
      return { value, shown: `${fixed(value)} ms (${fixed(a.p99)} − ${fixed(b.p99)})` };
    },
    ok: (v) => v <= 1,
  },
  { figure: 'events-many-keys / node-floor', row: 'events-many-keys', target: '≥ 0.80', measure: (rows) => ratio(rows, 'events-many-keys', 'node-floor'), ok: (v) => v >= 0.8 },
  { figure: 'mcp-tools-call / node-floor (same body)', row: 'mcp-tools-call', target: '≥ 0.70', measure: (rows) => ratio(rows, 'mcp-tools-call', 'node-floor-mcp'), ok: (v) => v >= 0.7 },
  { figure: 'admin-jwt / node-floor', row: 'admin-jwt', target: '≥ 0.80', measure: (rows) => ratio(rows, 'admin-jwt', 'node-floor'), ok: (v) => v >= 0.8 },
  { figure: 'events-rate-limited / node-floor, no Redis', row: 'events-rate-limited', target: '≥ 0.80', measure: (rows) => ratio(rows, 'events-rate-limited', 'node-floor'), ok: (v) => v >= 0.8 },
  { figure: 'events-rate-limited-redis / node-floor', row: 'events-rate-limited-redis', target: 'reported', measure: (rows) => ratio(rows, 'events-rate-limited-redis', 'node-floor') },
  {
    figure: 'argon2id verifies per key, storm of 100 concurrent first uses',
    row: 'cold-keys',
    target: '= 1',
    measure: (_rows, extras) =>
      extras.storm === undefined
        ? { missing: 'not run' }
        : { value: extras.storm.perKey, shown: `${fixed(extras.storm.perKey)} (${extras.storm.verifies} verifies, ${extras.storm.keys} keys × ${extras.storm.requestsPerKey})` },
    ok: (v) => v === 1,
  },
  {
    figure: 'valid-key p99 while 1,000 invalid keys/s hammer a real prefix',
    row: 'invalid-keys',
    target: '≤ 5 ms',
    measure: (_rows, extras) => {
      const invalid = extras.invalid;
      if (invalid === undefined) return { missing: 'not run' };
      if (invalid.validNon2xx > 0) return { missing: `${invalid.validNon2xx} valid-key requests refused` };
      return {
        value: invalid.p99,
        shown: `${fixed(invalid.p99)} ms (without the attack ${fixed(invalid.baselineP99)} ms; the same attack sent to the upstream instead ${fixed(invalid.controlP99)} ms)`,
      };
    },
    ok: (v) => v <= 5,
  },
  {
    figure: 'stale acceptances after DELETE returned 204, 3 replicas',
    target: '0',
    measure: (_rows, extras) =>
      extras.stale === undefined
        ? { missing: extras.skipped?.['stale'] ?? 'not run' }
        : { value: extras.stale.accepted, shown: `${extras.stale.accepted} of ${extras.stale.attempts} requests sent after the 204` },
    ok: (v) => v === 0,
  },
  {
    figure: 'start-up to /readyz, embedded store (median of 5)',
    target: '< 1 s',
    measure: (_rows, extras) =>
      extras.startup === undefined
        ? { missing: extras.skipped?.['startup'] ?? 'not run' }
        : { value: extras.startup.readyMsMedian, shown: `${fixed(extras.startup.readyMsMedian, 0)} ms (worst ${fixed(extras.startup.readyMsMax, 0)} ms)` },
    ok: (v) => v < 1000,
  },
  {
    figure: 'peak RSS in the first 10 s (VmHWM), embedded store',
    target: '< 200 MB',
    measure: (_rows, extras) =>
      extras.startup === undefined
        ? { missing: extras.skipped?.['startup'] ?? 'not run' }
        : { value: extras.startup.peakMbMax, shown: `${fixed(extras.startup.peakMbMax, 0)} MB at most (median ${fixed(extras.startup.peakMbMedian, 0)} MB)` },
    ok: (v) => v < 200,
  },
  ...(['embedded', 'postgres'] as const).map(
    (store): TargetSpec => ({
      figure: `RSS with 100,000 cached keys (${store === 'embedded' ? 'embedded store' : 'PostgreSQL'})`,
      target: '≤ 200 MB',
      measure: (_rows, extras) => {
        const rss = extras.rss?.[store];
        if (rss === undefined) return { missing: extras.skipped?.[`rss-${store}`] ?? extras.skipped?.['rss'] ?? 'not run' };
        const shown = `${fixed(rss.cachedMb, 0)} MB (after a full GC ${fixed(rss.afterGcMb, 0)} MB; idle ${fixed(rss.idleMb, 0)} MB; peak ${fixed(rss.peakMb, 0)} MB; live heap ${fixed(rss.idleHeapUsedMb, 0)} → ${fixed(rss.heapUsedMb, 0)} MB)`;
        if (rss.keys < 100_000) return { missing: `only ${rss.keys} keys cached: ${shown}` };
        if (rss.verifiesOnRepeat > 0) return { missing: `${shown}, but ${rss.verifiesOnRepeat} keys were no longer cached` };
        return { value: rss.cachedMb, shown };
      },
      ok: (v) => v <= 200,
    }),
  ),
];

export function evaluateTargets(rows: ReadonlyMap<string, Row>, extras: Extras): TargetResult[] {
  return TARGETS.map((spec) => {
    const measured = spec.measure(rows, extras);
    const base = { figure: spec.figure, target: spec.target, ...(spec.row === undefined ? {} : { row: spec.row }) };
    if ('missing' in measured) return { ...base, measured: measured.missing, met: undefined };
    return { ...base, measured: measured.shown, met: spec.ok?.(measured.value) };
  });
}

function table(header: string[], lines: string[][], rightAligned: ReadonlySet<number>): string {
  const widths = header.map((title, column) => Math.max(title.length, ...lines.map((line) => (line[column] ?? '').length)));
  const format = (cells: string[]) =>
    '| ' + cells.map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join(' | ') + ' |';
  const rule = '| ' + widths.map((width, column) => (rightAligned.has(column) ? '-'.repeat(width - 1) + ':' : '-'.repeat(width))).join(' | ') + ' |';
  return [format(header), rule, ...lines.map(format)].join('\n');
}

const verdict = (met: boolean | undefined) => (met === undefined ? 'n/a' : met ? 'yes' : 'NO');

/** The scenario table (markdown): one line per row, with the targets that row carries. */
export function scenarioTable(rows: readonly Row[], extras: Extras, targets: readonly TargetResult[]): string {
  const byName = new Map(rows.map((row) => [row.name, row]));
  const bare = byName.get('bare-proxy');
  const floor = byName.get('node-floor');
  const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : '–');
  const times = (row: Row, reference: Row | undefined) => (reference === undefined ? '–' : (row.rps / reference.rps).toFixed(2));
  const lines = rows.map((row) => {
    const own = targets.filter((target) => target.row === row.name);
    const answers = row.non2xx + row.errors === 0 ? 'all 2xx' : `${row.non2xx} non-2xx, ${row.errors} err; probe ${row.probe}`;
    return [
      row.name,
      Math.round(row.rps).toString(),
      ms(row.p50),
      ms(row.p99),
      ms(row.p999),
      times(row, bare),
      times(row, row.name === 'mcp-tools-call' ? byName.get('node-floor-mcp') : floor),
      row.cpuPerRequestUs === undefined ? '–' : row.cpuPerRequestUs.toFixed(0),
      row.runs.length > 1 ? `${row.spread.toFixed(0)}%` : '–',
      row.foreignCpu === undefined ? '–' : `${row.foreignCpu.toFixed(0)}%`,
      answers,
      own.map((target) => `${target.figure.replace(`${row.name} `, '')} ${target.target}`).join('; ') || '',
      own.map((target) => verdict(target.met)).join(', ') || '',
    ];
  });
  for (const name of ['cold-keys', 'invalid-keys']) {
    const own = targets.filter((target) => target.row === name);
    if (name === 'cold-keys' && extras.cold !== undefined) {
      const cold = extras.cold;
      lines.push([
        'cold-keys',
        `${Math.round(cold.verifiesPerSecond)} verifies/s`,
        ms(cold.p50),
        ms(cold.p99),
        '–',
        '–',
        '–',
        '–',
        '–',
        '–',
        `${cold.perKey.toFixed(2)} argon2/key; ${Object.entries(cold.statuses).map(([status, count]) => `${count}× ${status}`).join(', ')}`,
        own.map((target) => `storm: argon2/key ${target.target}`).join('; '),
        own.map((target) => verdict(target.met)).join(', '),
      ]);
    }
    if (name === 'invalid-keys' && extras.invalid !== undefined) {
      const invalid = extras.invalid;
      lines.push([
        'invalid-keys',
        `${invalid.validRate}/s valid`,
        ms(invalid.p50),
        ms(invalid.p99),
        ms(invalid.p999),
        '–',
        '–',
        '–',
        '–',
        '–',
        `${Math.round(invalid.attackAchieved)}/s wrong keys: ${Object.entries(invalid.attackStatuses).map(([status, count]) => `${count}× ${status}`).join(', ')}`,
        own.map((target) => `valid p99 ${target.target}`).join('; '),
        own.map((target) => verdict(target.met)).join(', '),
      ]);
    }
  }
  return table(
    ['scenario', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', '× bare', '× floor', 'CPU µs/req', 'drift', "others' CPU", 'answers', 'target', 'met?'],
    lines,
    new Set([1, 2, 3, 4, 5, 6, 7, 8, 9]),
  );
}

export function targetTable(targets: readonly TargetResult[]): string {
  return table(
    ['figure', 'target', 'measured', 'met?'],
    targets.map((target) => [target.figure, target.target, target.measured, verdict(target.met)]),
    new Set(),
  );
}
