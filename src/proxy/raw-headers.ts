import { GatewayError } from '../errors/gateway-error.ts';

/**
 * Node keeps only the first of two `Authorization` or `Host` headers in `request.headers`,
 * while another server in the chain might read the last: two of either is refused.
 */
export function assertSingleHeaders(rawHeaders: readonly string[]): void {
  let authorization = 0;
  let host = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 13 && name.toLowerCase() === 'authorization') authorization++;
    else if (name.length === 4 && name.toLowerCase() === 'host') host++;
  }
  if (authorization > 1) throw new GatewayError('duplicate_header', 'More than one Authorization header');
  if (host > 1) throw new GatewayError('duplicate_header', 'More than one Host header');
}
