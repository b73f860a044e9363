import type { ApiKeyPatch, ApiKeyRow, RotateKeyResult, UpdateKeyResult } from './store.ts';

/**
 * The rules of the key lifecycle that both stores apply inside their transactions
 * (docs/api-keys.md, "Key lifecycle"): pure, on the row each store has locked, so the two
 * SQL dialects differ only in how they read and write it.
 */

/** Whether a key counts towards `LICENSE_API_KEYS` at `now`: neither revoked, expired nor rotated (in a grace period); disabled keys do count. */
export function countsTowardsLicence(row: Pick<ApiKeyRow, 'revokedAt' | 'expiresAt' | 'rotatedTo'>, now: Date): boolean {
  return row.revokedAt === null && (row.expiresAt === null || row.expiresAt.getTime() > now.getTime()) && row.rotatedTo === null;
}

/**
 * The row after `patch`, or why it is refused. `checksLicence` tells the store to check the
 * licence: the patch enables the key, or makes it count again (an expired key given a later
 * expiry or none, which would otherwise be a way around the cap, like a create without its check).
 */
export function patched(before: ApiKeyRow, patch: ApiKeyPatch, now: Date): { after: ApiKeyRow; checksLicence: boolean } | { refused: Extract<UpdateKeyResult, { ok: false }>['reason'] } {
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
  const changed = changedFields(before, after).length > 0;
  // A key in its grace period counts towards no licence, enabled or not.
  const enabling = !before.enabled && after.enabled && countsTowardsLicence(after, now);
  const countsAgain = !countsTowardsLicence(before, now) && countsTowardsLicence(after, now);
  return { after: changed ? { ...after, updatedAt: now } : before, checksLicence: enabling || countsAgain };
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

/** Whether a predecessor (a key whose `rotatedTo` is the key being rotated) still accepts requests and must be revoked. */
export function stillInGrace(row: ApiKeyRow, now: Date): boolean {
  return row.revokedAt === null && (row.expiresAt === null || row.expiresAt.getTime() > now.getTime());
}

function isNoLater(next: Date | null, current: Date | null): boolean {
  if (current === null) return true;
  return next !== null && next.getTime() <= current.getTime();
}
