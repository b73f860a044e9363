import { z } from 'zod';
import type { AuditEventRow } from '../store/store.ts';

/** An audit event as the API answers it; the schema is also its OpenAPI description. */
export const auditEventSchema = z.strictObject({
  id: z.number().int().positive(),
  at: z.iso.datetime(),
  action: z.string().meta({ examples: ['login_succeeded', 'login_failed', 'key_created', 'key_revoked'] }),
  actor_kind: z.string().nullable().meta({ description: '`admin` (HTTP API) or `cli` (the gatehouse command)' }),
  actor_id: z.string().nullable().meta({ description: 'The admin id for `admin`, the operating-system user for `cli`' }),
  subject_id: z.string().nullable().meta({ description: 'The key id (key events) or admin id (admin events)' }),
  client_address: z.string().nullable(),
  detail: z.record(z.string(), z.unknown()),
});
export type AuditEventRecord = z.output<typeof auditEventSchema>;

export function toAuditRecord(row: AuditEventRow): AuditEventRecord {
  return {
    id: row.id,
    at: row.at.toISOString(),
    action: row.action,
    actor_kind: row.actorKind,
    actor_id: row.actorId,
    subject_id: row.subjectId,
    client_address: row.clientAddress,
    detail: row.detail,
  };
}
