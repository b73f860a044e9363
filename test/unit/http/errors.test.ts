import { describe, expect, it } from 'vitest';
import { ERROR_CODES, GatewayError, type ErrorCode } from '../../../src/errors/gateway-error.ts';
import { problemFor } from '../../../src/http/problem.ts';

describe('problem+json mapping', () => {
  it.each(Object.keys(ERROR_CODES) as ErrorCode[])('%s maps to its status with a problem body', (code) => {
    const problem = problemFor(new GatewayError(code, 'detail'), 'req-1');
    expect(problem.status).toBe(ERROR_CODES[code].status);
    expect(problem.headers['content-type']).toBe('application/problem+json; charset=utf-8');
    expect(problem.body).toMatchObject({ status: ERROR_CODES[code].status, code, detail: 'detail', instance: 'req-1' });
    expect(problem.body.type).toMatch(/^https:\/\//);
    if (problem.status === 401) expect(problem.headers['www-authenticate']).toMatch(/^Bearer realm="gatehouse"/);
    // No challenge where no other credential or scope changes the answer (a client would step up for nothing).
    const unchallenged = code === 'origin_not_allowed' || code === 'method_not_allowed_for_key';
    if (problem.status === 403) expect(problem.headers['www-authenticate']).toEqual(unchallenged ? undefined : expect.stringMatching(/error="insufficient_scope"/));
  });

  it('names the missing scope in the challenge', () => {
    const problem = problemFor(new GatewayError('insufficient_scope', 'x', { scope: 'events:write' }));
    expect(problem.headers['www-authenticate']).toBe('Bearer realm="gatehouse", error="insufficient_scope", scope="events:write"');
  });

  it('keeps quotes and control characters out of the challenge', () => {
    const problem = problemFor(new GatewayError('invalid_credential', 'bad "token"\r\nx'));
    expect(problem.headers['www-authenticate']).not.toMatch(/[\r\n]|"token"/);
  });

  it('sets Retry-After on 429', () => {
    expect(problemFor(new GatewayError('rate_limited', 'x', { retryAfter: 12.2 })).headers['retry-after']).toBe('13');
  });
});

describe('GatewayError stacks', () => {
  it('captures no stack frames for a refusal (4xx), and keeps them for a failure (5xx)', () => {
    const limit = Error.stackTraceLimit;
    const refusal = new GatewayError('rate_limited', 'Too many failed attempts', { retryAfter: 30 });
    const failure = new GatewayError('store_unavailable');
    expect(refusal.stack).not.toMatch(/\n\s+at /);
    expect(refusal.message).toBe('Too many failed attempts');
    expect(failure.stack).toMatch(/\n\s+at /);
    // The global limit is put back, whatever the status.
    expect(Error.stackTraceLimit).toBe(limit);
    expect(new Error('plain').stack).toMatch(/\n\s+at /);
  });
});
