import type { CliIo } from './command.ts';

export function printJson(io: CliIo, value: unknown): void {
  io.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** Plain columns for people; `--json` is the format for scripts. */
export function printTable(io: CliIo, headers: string[], rows: Array<Array<string | number | null>>): void {
  const cells = [headers, ...rows.map((row) => row.map((cell) => (cell === null || cell === '' ? '-' : String(cell))))];
  const widths = headers.map((_, column) => Math.max(...cells.map((row) => row[column]!.length)));
  for (const row of cells) io.stdout.write(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  ').trimEnd() + '\n');
}

/** One field a line, the names in a column: a single record for people. */
export function printFields(io: CliIo, fields: ReadonlyArray<readonly [string, string | number | null]>): void {
  const width = Math.max(...fields.map(([name]) => name.length)) + 2;
  for (const [name, value] of fields) io.stdout.write(`${name.padEnd(width)}${value === null || value === '' ? '-' : String(value)}`.trimEnd() + '\n');
}
