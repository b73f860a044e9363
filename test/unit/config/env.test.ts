import { describe, expect, it } from 'vitest';
import { envSchema } from '../../../src/config/env.ts';
import { parseDurationSeconds } from '../../../src/config/duration.ts';
import { loadConfig } from '../../../src/config/load.ts';

describe('environment schema', () => {
  it('has the defaults of docs/configuration.md', () => {
    const env = envSchema.parse({});
    expect(env).toMatchObject({
      PORT: 8080,
      HOST: '0.0.0.0',
      OPS_PORT: 8081,
      UPSTREAM_URL: 'http://127.0.0.1:3000',
      DATA_DIR: './data',
      ADMIN_SESSION_TTL: 28_800,
      LICENSE_FEATURES: [],
      MCP_PATH: '/mcp',
      FORWARD_AUTHORIZATION: false,
      LOG_LEVEL: 'info',
    });
    expect(env.DATABASE_URL).toBeUndefined();
    expect(env.REDIS_URL).toBeUndefined();
    expect(env.LICENSE_API_KEYS).toBeUndefined();
  });

  it.each([
    ['seconds', '3600', 3600],
    ['hours', '8h', 28_800],
    ['minutes', '30m', 1800],
    ['seconds with a unit', '45s', 45],
    ['days', '1d', 86_400],
  ])('reads a TTL in %s', (_what, text, seconds) => {
    expect(parseDurationSeconds(text)).toBe(seconds);
  });

  it.each(['', '8 hours', '-5', '0', '1.5h', 'h'])('refuses the TTL %j', (text) => {
    expect(parseDurationSeconds(text)).toBeUndefined();
  });

  it.each([
    ['LICENSE_FEATURES', { LICENSE_FEATURES: 'events,warp' }],
    ['PORT', { PORT: 'eighty' }],
    ['OPS_PORT', { OPS_PORT: '70000' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'ftp://x' }],
    ['REDIS_URL', { REDIS_URL: 'http://x' }],
    ['ADMIN_SESSION_TTL', { ADMIN_SESSION_TTL: 'soon' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
    ['MCP_PATH', { MCP_PATH: 'mcp' }],
    ['MCP_PATH', { MCP_PATH: '/api/v1/auth/mcp' }],
    ['MCP_PATH', { MCP_PATH: '/docs' }],
    ['MCP_PATH', { MCP_PATH: '/API/V1/audit-mcp' }],
    ['MCP_SSE_PATH', { MCP_SSE_PATH: '/console/sse', MCP_MESSAGES_PATH: '/messages' }],
    ['MCP_MESSAGES_PATH', { MCP_SSE_PATH: '/sse', MCP_MESSAGES_PATH: '/api/v1/api-keys/messages' }],
    ['JWT_SECRET', { JWT_SECRET: 'short' }],
    ['HEADERS_TIMEOUT', { HEADERS_TIMEOUT: '0' }],
    ['REQUEST_TIMEOUT', { REQUEST_TIMEOUT: 'forever' }],
    ['KEEP_ALIVE_TIMEOUT', { KEEP_ALIVE_TIMEOUT: '-1s' }],
    ['MAX_CONNECTIONS', { MAX_CONNECTIONS: '0' }],
    ['MAX_STREAMS_PER_KEY', { MAX_STREAMS_PER_KEY: 'many' }],
    ['MCP_MAX_BATCH', { MCP_MAX_BATCH: '1.5' }],
  ])('refuses a bad %s, naming it', (variable, env) => {
    const result = envSchema.safeParse(env);
    expect(result.success).toBe(false);
    expect(result.error!.issues[0]!.path[0]).toBe(variable);
  });

  it('says why an MCP path under a reserved path is refused', () => {
    const result = envSchema.safeParse({ MCP_PATH: '/api/v1/auth/mcp' });
    expect(result.error!.issues[0]!.message).toBe('lies under a path reserved for the gateway, so it would never be reached');
    expect(envSchema.parse({ MCP_PATH: '/api/v1/authors/mcp' }).MCP_PATH).toBe('/api/v1/authors/mcp');
  });

  it('has the abuse bounds of the security docs', () => {
    expect(envSchema.parse({})).toMatchObject({
      HEADERS_TIMEOUT: 10_000,
      REQUEST_TIMEOUT: 30_000,
      KEEP_ALIVE_TIMEOUT: 5_000,
      MAX_CONNECTIONS: 10_000,
      MAX_STREAMS_PER_KEY: 16,
      MCP_MAX_BATCH: 100,
    });
  });

  it('refuses a header deadline longer than the whole request\'s, naming it', () => {
    expect(() => loadConfig({ HEADERS_TIMEOUT: '40s', REQUEST_TIMEOUT: '30s' })).toThrow(/^HEADERS_TIMEOUT: /);
    expect(loadConfig({ HEADERS_TIMEOUT: '30s', REQUEST_TIMEOUT: '30s' }).env.HEADERS_TIMEOUT).toBe(30_000);
  });

  it('reads licensed features, folding duplicates', () => {
    expect(envSchema.parse({ LICENSE_FEATURES: 'events, recall,events' }).LICENSE_FEATURES).toEqual(['events', 'recall']);
  });
});

describe('DEFAULT_KEY_RATE_LIMIT', () => {
  it('is unset by default: a new key gets no limit', () => {
    expect(envSchema.parse({}).DEFAULT_KEY_RATE_LIMIT).toBeUndefined();
  });

  it.each([
    ['600/1m', { requests: 600, perSeconds: 60 }],
    ['10/1s', { requests: 10, perSeconds: 1 }],
    ['100/m', { requests: 100, perSeconds: 60 }],
    ['10000/1d', { requests: 10_000, perSeconds: 86_400 }],
    ['5/90', { requests: 5, perSeconds: 90 }],
    ['1000000/24h', { requests: 1_000_000, perSeconds: 86_400 }],
    [' 7/2000ms ', { requests: 7, perSeconds: 2 }],
  ])('reads %j', (text, rule) => {
    expect(loadConfig({ DEFAULT_KEY_RATE_LIMIT: text }).env.DEFAULT_KEY_RATE_LIMIT).toEqual(rule);
  });

  it.each([
    ['600', /is not N\/DURATION/],
    ['600 per minute', /is not N\/DURATION/],
    ['-1/1m', /is not N\/DURATION/],
    ['1.5/1m', /is not N\/DURATION/],
    ['0/1m', /requests must be 1 to 1,000,000/],
    ['1000001/1m', /requests must be 1 to 1,000,000/],
    ['99999999999999999999/1m', /requests must be 1 to 1,000,000/],
    ['10/0s', /the duration must be 1 s to 24 h/],
    ['10/2d', /the duration must be 1 s to 24 h/],
    ['10/1w', /'1w' is not a duration/],
    ['10/1500ms', /'1500ms' is not a whole number of seconds/],
  ])('refuses %j at start, naming the variable', (text, message) => {
    expect(() => loadConfig({ DEFAULT_KEY_RATE_LIMIT: text })).toThrow(/^DEFAULT_KEY_RATE_LIMIT: /);
    expect(() => loadConfig({ DEFAULT_KEY_RATE_LIMIT: text })).toThrow(message);
  });
});
