import { unstorableIn } from './storable-text.ts';
import type { StoreData } from './store.ts';

/** A string of a copied record that had to change to be stored (`name` of API key 7). */
export interface Replacement {
  table: 'admins' | 'api_keys' | 'audit_events' | 'settings' | 'admin_sessions';
  /** The record's id (a setting's name). */
  id: number | string;
  field: string;
}

/** Unicode's own stand-in for a character that cannot be represented. */
const REPLACEMENT_CHARACTER = '\uFFFD';

/**
 * What `store copy` writes: every record as the source holds it, except that a string the
 * target could not hold (a NUL, which a pre-release (8.1 development) embedded SQLite store
 * may have taken in a key's name, though 8.0's PGlite store, PostgreSQL, refused it; a lone
 * surrogate) gets U+FFFD in place of each such character, and is reported.
 * A copy never fails on a character, and it holds only what the gateway accepts today
 * (src/store/storable-text.ts).
 */
export function storableData(data: StoreData): { data: StoreData; replaced: Replacement[] } {
  const replaced: Replacement[] = [];
  const rows = <T extends object>(table: Replacement['table'], list: T[], idOf: (row: T) => number | string): T[] =>
    list.map((row) => {
      const cleaned = storableValue(row) as T;
      if (cleaned === row) return row;
      for (const [field, value] of Object.entries(row)) {
        if ((cleaned as Record<string, unknown>)[field] !== value) replaced.push({ table, id: idOf(cleaned), field });
      }
      return cleaned;
    });
  return {
    data: {
      admins: rows('admins', data.admins, (row) => row.id),
      apiKeys: rows('api_keys', data.apiKeys, (row) => row.id),
      auditEvents: rows('audit_events', data.auditEvents, (row) => row.id),
      settings: rows('settings', data.settings, (row) => row.name),
      adminSessions: rows('admin_sessions', data.adminSessions, (row) => row.id),
    },
    replaced,
  };
}

/** The value itself when it holds nothing unstorable (so a caller can tell by identity), else a cleaned copy. */
function storableValue(value: unknown): unknown {
  if (typeof value === 'string') return unstorableIn(value) === null ? value : value.toWellFormed().replaceAll('\0', REPLACEMENT_CHARACTER);
  if (Array.isArray(value)) {
    const items = value.map(storableValue);
    return items.some((item, index) => item !== value[index]) ? items : value;
  }
  if (value !== null && typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) {
    // A row, or a JSON object in one (an audit event's detail, whose member names are strings too).
    const entries = Object.entries(value);
    const cleaned = entries.map(([name, member]) => [storableValue(name) as string, storableValue(member)] as const);
    return cleaned.some(([name, member], index) => name !== entries[index]![0] || member !== entries[index]![1]) ? Object.fromEntries(cleaned) : value;
  }
  return value;
}

/** For people: `name of API key 7`. */
export function describeReplacement(replacement: Replacement): string {
  const noun = { admins: 'admin', api_keys: 'API key', audit_events: 'audit event', settings: 'setting', admin_sessions: 'admin session' }[replacement.table];
  return `${replacement.field} of ${noun} ${replacement.id}`;
}
