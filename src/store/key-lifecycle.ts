import type { ApiKeyPatch, ApiKeyRow, RotateKeyResult, UpdateKeyResult } from './store.ts';

/**
 * The rules of the key lifecycle that both stores apply inside their transactions
 * (docs/api-keys.md, "Key lifecycle"): pure, on the row each store has locked, so the two
 * SQL dialects differ only in how they read and write it.
 */

/**
 * Whether a key counts towards `LICENSE_API_KEYS` at `now`: live (neither revoked nor expired;
 * disabled keys count), and not in a grace period whose successor is live. A rotation moves the
 * count to the new key; revoking the new key (or its expiry) moves it back, so that neither a
 * rotation nor its undoing changes how many keys count.
 */
export function countsTowardsLicence(row: Pick<ApiKeyRow, 'revokedAt' | 'expiresAt' | 'rotatedTo'>, now: Date, successorLive: boolean): boolean {
  return isLive(row, now) && (row.rotatedTo === null || !successorLive);
}

export function isLive(row: Pick<ApiKeyRow, 'revokedAt' | 'expiresAt'>, now: Date): boolean {
  return row.revokedAt === null && (row.expiresAt === null || row.expiresAt.getTime() > now.getTime());
}

/**
 * The row after `patch`, or why it is refused. `checksLicence` tells the store to check the
 * licence: the patch enables a key that counts, or makes it count again (an expired key given
 * a later expiry or none, which would otherwise be a way around the cap, like a create without
 * its check). `successorLive`: the key is in a grace period whose successor is live.
 */
export function patched(
  before: ApiKeyRow,
  patch: ApiKeyPatch,
  now: Date,
  successorLive: boolean,
): { after: ApiKeyRow; changed: string[]; checksLicence: boolean } | { refused: Extract<UpdateKeyResult, { ok: false }>['reason'] } {
  if (before.revokedAt !== null) return { refused: 'revoked' };
  if (before.rotatedTo !== null && patch.expiresAt !== undefined && !isNoLater(patch.expiresAt, before.expiresAt)) return { refused: 'rotated' };
  const after: ApiKeyRow = {
    ...before,
    ...(patch.name === undefined ? {} : { name: patch.name }),
    ...(patch.scopes === undefined ? {} : { scopes: patch.scopes }),
    ...(patch.agentId === undefined ? {} : { agentId: patch.agentId }),
    ...(patch.expiresAt === undefined ? {} : { expiresAt: patch.expiresAt }),
    ...(patch.enabled === undefined ? {} : { enabled: patch.enabled }),
    ...(patch.rateLimit === undefined ? {} : { rateLimit: patch.rateLimit }),
  };
  const changed = changedFields(before, after);
  const counts = countsTowardsLicence(after, now, successorLive);
  const enabling = !before.enabled && after.enabled && counts;
  const countsAgain = !countsTowardsLicence(before, now, successorLive) && counts;
  return { after: changed.length > 0 ? { ...after, updatedAt: now } : before, changed, checksLicence: enabling || countsAgain };
}

/** The names (as the API spells them) of the fields that differ between two versions of a key. */
export function changedFields(before: ApiKeyRow, after: ApiKeyRow): string[] {
  const fields: string[] = [];
  if (before.name !== after.name) fields.push('name');
  if (before.scopes.join('\n') !== after.scopes.join('\n')) fields.push('scopes');
  if (before.agentId !== after.agentId) fields.push('agent_id');
  if (before.expiresAt?.getTime() !== after.expiresAt?.getTime()) fields.push('expires_at');
  if (before.enabled !== after.enabled) fields.push('enabled');
  if (before.rateLimit?.requests !== after.rateLimit?.requests || before.rateLimit?.perSeconds !== after.rateLimit?.perSeconds) fields.push('rate_limit');
  return fields;
}

/** What rotating `old` does to it at `now`, or why it cannot be rotated. */
export function rotation(
  old: ApiKeyRow,
  now: Date,
  graceMs: number,
): { expiresAt: Date | null; revokedAt: Date | null } | { refused: Extract<RotateKeyResult, { ok: false }>['reason'] } {
  if (old.revokedAt !== null) return { refused: 'revoked' };
  if (old.expiresAt !== null && old.expiresAt.getTime() <= now.getTime()) return { refused: 'expired' };
  if (old.rotatedTo !== null) return { refused: 'rotated' };
  // The earlier of its own expiry and the grace period's end; no grace revokes it as well.
  const graceEnds = new Date(now.getTime() + graceMs);
  const expiresAt = old.expiresAt !== null && old.expiresAt.getTime() < graceEnds.getTime() ? old.expiresAt : graceEnds;
  return { expiresAt, revokedAt: graceMs === 0 ? now : null };
}

/** Whether `predecessor` (the key being rotated replaced it) still accepts requests and must be revoked: at most two live keys in a chain. */
export function stillInGrace(predecessor: ApiKeyRow | null, rotated: ApiKeyRow, now: Date): predecessor is ApiKeyRow {
  return predecessor !== null && predecessor.rotatedTo === rotated.id && isLive(predecessor, now);
}

function isNoLater(next: Date | null, current: Date | null): boolean {
  if (current === null) return true;
  return next !== null && next.getTime() <= current.getTime();
}
