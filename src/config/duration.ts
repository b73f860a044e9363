/** Parses `3600`, `8h`, `30m`, `45s`, `500ms` or `1d` into whole seconds (ms rounded up). */
export function parseDurationSeconds(text: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) return undefined;
  const value = Number(match[1]);
  const unit = match[2] ?? 's';
  const seconds = unit === 'ms' ? Math.ceil(value / 1000) : value * UNIT_SECONDS[unit]!;
  return Number.isSafeInteger(seconds) && seconds > 0 ? seconds : undefined;
}

/** Same grammar as {@link parseDurationSeconds}, in milliseconds. */
export function parseDurationMs(text: string): number | undefined {
  const match = /^(\d+)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) return undefined;
  const value = Number(match[1]);
  const unit = match[2] ?? 's';
  const ms = unit === 'ms' ? value : value * UNIT_SECONDS[unit]! * 1000;
  return Number.isSafeInteger(ms) && ms > 0 ? ms : undefined;
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };
