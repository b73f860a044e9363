import { z } from 'zod';

/**
 * Text both stores hold exactly as it was sent (docs/security.md, "Strings a store cannot
 * hold"). Two things have no faithful place in them:
 *
 * - U+0000 (NUL): PostgreSQL's `text` and `jsonb` refuse it outright (a `500` if it got that
 *   far), while SQLite keeps it, so a store that took one could no longer be copied.
 * - a lone surrogate (half of a UTF-16 pair, U+D800–U+DFFF on its own): not Unicode at all;
 *   UTF-8, in which both stores keep text, has no form for it, so the drivers would store
 *   U+FFFD in its place (and `jsonb` refuses its `\ud800` escape).
 *
 * Everything else a JSON string can hold, control characters included, is stored as sent.
 */
export function unstorableIn(text: string): string | null {
  if (text.includes('\0')) return 'must not contain a NUL character (U+0000)';
  if (!text.isWellFormed()) return 'must be valid Unicode (it holds a lone surrogate, U+D800–U+DFFF)';
  return null;
}

/**
 * Only the lone-surrogate half of the rule, for secrets that are hashed and never stored (a
 * password): argon2id takes any bytes, NUL included, but a lone surrogate becomes U+FFFD on
 * its way to UTF-8, so two different passwords would be one.
 */
export function unencodableIn(text: string): string | null {
  return text.isWellFormed() ? null : 'must be valid Unicode (it holds a lone surrogate, U+D800–U+DFFF)';
}

/**
 * A string a store can hold: the piece every request body, query and CLI argument that is
 * written (or looked up) starts from. It runs before the schema's own rules and stops them, so
 * the refusal names this problem alone.
 */
export function storableString() {
  return z.string().refine((text) => unstorableIn(text) === null, { error: (issue) => unstorableIn(String(issue.input)) ?? 'invalid', abort: true });
}

/** A string that is hashed, never stored (a password): valid Unicode, NUL allowed. */
export function encodableString() {
  return z.string().refine((text) => unencodableIn(text) === null, { error: (issue) => unencodableIn(String(issue.input)) ?? 'invalid', abort: true });
}
