import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_EMAIL, ADMIN_PASSWORD, startGateway, type GatewayProcess } from '../support/gateway-process.ts';
import { request } from '../support/http.ts';

const JWT_SECRET = 'a-test-secret-that-is-long-enough-for-hs256';
const secret = new TextEncoder().encode(JWT_SECRET);

function login(gateway: GatewayProcess, json: unknown, headers: Record<string, string> = {}) {
  return request(`${gateway.url}/api/v1/auth/login`, { method: 'POST', json, headers });
}

async function forge(claims: { iss?: string; aud?: string; sub?: string; exp?: number; jti?: string }, alg = 'HS256') {
  const jwt = new SignJWT({}).setProtectedHeader({ alg });
  if (claims.iss) jwt.setIssuer(claims.iss);
  if (claims.aud) jwt.setAudience(claims.aud);
  if (claims.sub) jwt.setSubject(claims.sub);
  if (claims.jti) jwt.setJti(claims.jti);
  if (claims.exp) jwt.setExpirationTime(claims.exp);
  return jwt.sign(alg === 'HS512' ? new TextEncoder().encode(JWT_SECRET.repeat(2)) : secret);
}

describe('admin login (spawned gateway)', () => {
  let gateway: GatewayProcess;
  beforeAll(async () => {
    gateway = await startGateway({ JWT_SECRET, ADMIN_SESSION_TTL: '30m' });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('returns a bearer token with iss, aud, sub, jti and exp = now + ADMIN_SESSION_TTL', async () => {
    const before = Math.floor(Date.now() / 1000);
    const response = await login(gateway, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    const after = Math.ceil(Date.now() / 1000);
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.body).toMatchObject({ token_type: 'Bearer', expires_in: 1800 });
    const claims = decodeJwt(response.body.token);
    expect(claims).toMatchObject({ iss: 'gatehouse', aud: 'gatehouse-admin', sub: expect.stringMatching(/^\d+$/) });
    expect(claims.jti).toEqual(expect.any(String));
    // Issued between the request and its answer, however long the login took.
    expect(claims.exp! - before).toBeGreaterThanOrEqual(1800);
    expect(claims.exp! - after).toBeLessThanOrEqual(1800);
    expect(Date.parse(response.body.expires_at)).toBe(claims.exp! * 1000);
  });

  it('accepts the email in any case', async () => {
    const response = await login(gateway, { email: ADMIN_EMAIL.toUpperCase(), password: ADMIN_PASSWORD });
    expect(response.status).toBe(200);
  });

  it('answers a wrong email and a wrong password with the same 401', async () => {
    const wrongPassword = await login(gateway, { email: ADMIN_EMAIL, password: 'nope' });
    const wrongEmail = await login(gateway, { email: 'nobody@example.test', password: ADMIN_PASSWORD });
    expect(wrongPassword.status).toBe(401);
    expect(wrongEmail.status).toBe(401);
    const strip = (body: Record<string, unknown>) => ({ ...body, instance: undefined });
    expect(strip(wrongEmail.body)).toEqual(strip(wrongPassword.body));
    expect(wrongEmail.body.code).toBe('invalid_credential');
    expect(wrongEmail.headers.get('www-authenticate')).toMatch(/^Bearer /);
  });

  it.each([
    ['no body', undefined],
    ['a missing password', { email: ADMIN_EMAIL }],
    ['a password that is not a string', { email: ADMIN_EMAIL, password: 123 }],
    ['an unknown field', { email: ADMIN_EMAIL, password: ADMIN_PASSWORD, role: 'root' }],
    ['an array', [ADMIN_EMAIL, ADMIN_PASSWORD]],
  ])('refuses %s with 400 validation_failed', async (_what, json) => {
    const response = await login(gateway, json);
    expect(response.status).toBe(400);
    expect(response.body.code).toMatch(/validation_failed|bad_request/);
  });

  it.each([
    ['expired', () => forge({ iss: 'gatehouse', aud: 'gatehouse-admin', sub: '1', jti: 'x', exp: Math.floor(Date.now() / 1000) - 5 }), 'expired_credential'],
    ['from another issuer', () => forge({ iss: 'evil', aud: 'gatehouse-admin', sub: '1', jti: 'x', exp: Math.floor(Date.now() / 1000) + 60 }), 'invalid_credential'],
    ['for another audience', () => forge({ iss: 'gatehouse', aud: 'other', sub: '1', jti: 'x', exp: Math.floor(Date.now() / 1000) + 60 }), 'invalid_credential'],
    ['without exp', () => forge({ iss: 'gatehouse', aud: 'gatehouse-admin', sub: '1', jti: 'x' }), 'invalid_credential'],
    ['signed with HS512', () => forge({ iss: 'gatehouse', aud: 'gatehouse-admin', sub: '1', jti: 'x', exp: Math.floor(Date.now() / 1000) + 60 }, 'HS512'), 'invalid_credential'],
  ])('refuses an admin token %s with 401', async (_what, make, code) => {
    const response = await request(`${gateway.url}/api/v1/api-keys`, { token: await make() });
    expect(response.status).toBe(401);
    expect(response.body.code).toBe(code);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/);
  });

  it('accepts a token it signed with its own claims', async () => {
    const token = await forge({ iss: 'gatehouse', aud: 'gatehouse-admin', sub: '1', jti: 'x', exp: Math.floor(Date.now() / 1000) + 60 });
    const response = await request(`${gateway.url}/api/v1/api-keys`, { token });
    expect(response.status).toBe(200);
  });
});

describe('login throttling (spawned gateway)', () => {
  let gateway: GatewayProcess;
  beforeAll(async () => {
    gateway = await startGateway();
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('after 10 failures for one email answers 429 with Retry-After, even for the right password', async () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const response = await login(gateway, { email: ADMIN_EMAIL, password: `wrong ${attempt}` });
      expect(response.status).toBe(401);
    }
    const throttled = await login(gateway, { email: ADMIN_EMAIL, password: ADMIN_PASSWORD });
    expect(throttled.status).toBe(429);
    expect(throttled.body.code).toBe('rate_limited');
    const retryAfter = Number(throttled.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(800);
    expect(retryAfter).toBeLessThanOrEqual(900);
  });

  it('the same client address is throttled for every email', async () => {
    const response = await login(gateway, { email: 'someone-else@example.test', password: 'x' });
    expect(response.status).toBe(429);
  });

  it('never logs the password or the token', async () => {
    expect(gateway.output()).not.toContain(ADMIN_PASSWORD);
    expect(gateway.output()).not.toMatch(/wrong \d/);
  });
});
