/**
 * `bare-proxy`: fastify + @fastify/http-proxy with no auth at all, with the undici options of
 * src/proxy/forward.ts — the floor of the proxy library the gateway is built on.
 *
 * Run as a process: PORT, HOST, UPSTREAM_URL.
 */
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';

const app = Fastify({ logger: false });
await app.register(httpProxy, {
  upstream: process.env.UPSTREAM_URL ?? 'http://127.0.0.1:3000',
  prefix: '/',
  undici: { connections: 128, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: 30_000, bodyTimeout: 0 },
} as unknown as Parameters<typeof httpProxy>[1]);
await app.listen({ port: Number(process.env.PORT ?? 8090), host: process.env.HOST ?? '127.0.0.1' });
process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
