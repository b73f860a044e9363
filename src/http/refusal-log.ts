import type { IncomingMessage } from 'node:http';
import { extractBearer } from '../credentials/bearer.ts';
import { isWellFormedKey, keyPrefixOf } from '../credentials/key-format.ts';

/** What the transport knows of a refused request beyond the request itself. */
export interface RefusalSubject {
  /** The route-table name of the route that decided it (docs/configuration.md, "The tables in config/"). */
  readonly routeName?: string | undefined;
  /** The gateway's own endpoint that refused it, as fastify routes it (`/api/v1/api-keys/:id`). */
  readonly endpoint?: string | undefined;
  /** The API key the credential was proven to be, when it was. */
  readonly keyId?: number | undefined;
}

/** The fields of a `request refused` line, beside its `reqId`, `code` and `status` (docs/monitoring.md, "Log lines"). */
export interface RefusalFields {
  method: string | undefined;
  path: string;
  route?: string;
  endpoint?: string;
  credential: 'api_key' | 'admin' | 'none' | 'unknown';
  keyId?: number;
  keyPrefix?: string;
}

/** A path longer than this is cut: the line stays one readable line whatever a client sends. */
const MAX_PATH_LENGTH = 512;

/**
 * What an operator needs to tell which request was refused, and nothing a client could use
 * to leak a secret into the log: the path without its query string (where a client may have
 * put a key or a token), the kind of credential by its shape, and for an API key its id once
 * proven or its public `key_prefix` when it is well formed (never a byte of the rest).
 */
export function refusalFields(request: IncomingMessage, subject: RefusalSubject = {}): RefusalFields {
  const target = request.url ?? '';
  const end = target.search(/[?#]/);
  const path = end === -1 ? target : target.slice(0, end);
  const bearer = extractBearer(request.headers.authorization);
  const fields: RefusalFields = {
    method: request.method,
    path: path.length > MAX_PATH_LENGTH ? `${path.slice(0, MAX_PATH_LENGTH)}…` : path,
    credential: bearer.kind === 'jwt' ? 'admin' : bearer.kind === 'api_key' || bearer.kind === 'none' ? bearer.kind : 'unknown',
  };
  if (subject.routeName !== undefined) fields.route = subject.routeName;
  if (subject.endpoint !== undefined) fields.endpoint = subject.endpoint;
  if (subject.keyId !== undefined) fields.keyId = subject.keyId;
  if (bearer.kind === 'api_key' && isWellFormedKey(bearer.token)) fields.keyPrefix = keyPrefixOf(bearer.token);
  return fields;
}
