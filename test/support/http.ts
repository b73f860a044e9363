/* eslint-disable @typescript-eslint/no-explicit-any -- test responses are read as loosely typed JSON */
import { ADMIN_EMAIL, ADMIN_PASSWORD } from './gateway-process.ts';

export interface JsonResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** fetch, with the body read as JSON when it is JSON. */
export async function request<T = any>(url: string, init: RequestInit & { json?: unknown; token?: string } = {}): Promise<JsonResponse<T>> {
  const headers = new Headers(init.headers);
  if (init.token !== undefined) headers.set('authorization', `Bearer ${init.token}`);
  let body = init.body;
  if (init.json !== undefined) {
    headers.set('content-type', 'application/json');
    body = JSON.stringify(init.json);
  }
  const response = await fetch(url, { ...init, headers, body });
  const text = await response.text();
  const type = response.headers.get('content-type') ?? '';
  return { status: response.status, headers: response.headers, text, body: type.includes('json') && text ? JSON.parse(text) : text };
}

export async function loginAdmin(baseUrl: string, email = ADMIN_EMAIL, password = ADMIN_PASSWORD): Promise<string> {
  const response = await request(`${baseUrl}/api/v1/auth/login`, { method: 'POST', json: { email, password } });
  if (response.status !== 200) throw new Error(`login failed: ${response.status} ${response.text}`);
  return response.body.token as string;
}

export async function createKey(baseUrl: string, token: string, json: Record<string, unknown> = { name: 'test key' }) {
  return request(`${baseUrl}/api/v1/api-keys`, { method: 'POST', token, json });
}

/** Key ids in a path that name no key (404) or are no id at all (400): every endpoint of one key answers them alike. */
export const BAD_KEY_IDS: ReadonlyArray<readonly [what: string, id: string, status: number, code: string]> = [
  ['an unknown id', '999999', 404, 'not_found'],
  ['id 0', '0', 404, 'not_found'],
  ['a negative id', '-3', 404, 'not_found'],
  ['a word', 'abc', 400, 'validation_failed'],
  ['a decimal', '1.5', 400, 'validation_failed'],
  ['leading zeros', '01', 400, 'validation_failed'],
  ['an encoded id', '%31', 400, 'validation_failed'],
  ['a huge number', '99999999999999999999999', 400, 'validation_failed'],
];
