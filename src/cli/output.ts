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
