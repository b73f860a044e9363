import { describe, expect, it } from 'vitest';
import { clientResponseHeaders, isIntermediaryCacheField } from '../../../src/proxy/upstream-headers.ts';

describe('cache fields for intermediaries', () => {
  it.each(['cdn-cache-control', 'cloudflare-cdn-cache-control', 'akamai-cdn-cache-control', 'surrogate-control', 'edge-control', 'x-accel-expires'])(
    '%s tells a CDN how to cache',
    (name) => expect(isIntermediaryCacheField(name)).toBe(true),
  );

  it.each(['cache-control', 'cdn-cache-controls', 'x-cdn-cache', 'surrogate-key', 'expires', 'vary'])('%s is not one of them', (name) => {
    expect(isIntermediaryCacheField(name)).toBe(false);
  });

  const upstream = { 'content-type': 'application/json', 'cdn-cache-control': 'public, max-age=300', 'surrogate-control': 'max-age=300', 'cloudflare-cdn-cache-control': 'max-age=60' };

  it('are dropped from a private answer, the rest kept', () => {
    expect(clientResponseHeaders(upstream, 'r1', ['cache-control', 'no-store'], true)).toEqual(['content-type', 'application/json', 'cache-control', 'no-store', 'x-request-id', 'r1']);
  });

  it('are the upstream\'s business on any other answer', () => {
    expect(clientResponseHeaders(upstream, 'r1')).toEqual([...Object.entries(upstream).flat(), 'x-request-id', 'r1']);
  });
});
