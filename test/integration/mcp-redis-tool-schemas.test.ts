import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RedisToolSchemas } from '../../src/mcp/redis-tool-schemas.ts';
import { ToolParamHeaders } from '../../src/mcp/tool-param-headers.ts';
import { closeRedisConnection, createRedisConnection } from '../../src/redis/connection.ts';
import { describeWithRedis, redisUrl } from '../support/services.ts';

async function ready(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
}

const annotated = { name: 'get_agent_status', inputSchema: { type: 'object', properties: { agent_id: { type: 'integer', 'x-mcp-header': 'Agent-Id' } } } };

describeWithRedis('RedisToolSchemas: the mirrored parameters one replica learnt, known to the others', () => {
  const prefix = `gh-test-${randomBytes(4).toString('hex')}:`;
  let a: Redis;
  let b: Redis;
  const replica = (redis: Redis) => new ToolParamHeaders({ shared: new RedisToolSchemas({ redis, prefix }) });

  beforeAll(async () => {
    a = createRedisConnection(redisUrl()!, { name: 'test:tool-schemas-a' });
    b = createRedisConnection(redisUrl()!, { name: 'test:tool-schemas-b' });
    await Promise.all([ready(a), ready(b)]);
  });
  afterAll(async () => {
    const keys = await a.keys(`${prefix}*`);
    if (keys.length > 0) await a.del(...keys);
    await Promise.all([closeRedisConnection(a), closeRedisConnection(b)]);
  });

  it('a tool listed through one replica is recalled by another before a call is decided', async () => {
    const one = replica(a);
    const two = replica(b);
    one.learn([annotated, { name: 'broken', inputSchema: { properties: { x: { 'x-mcp-header': 'not a token' } } } }]);
    // The publish is not awaited by the relay: wait for it the way a second replica would see it.
    await expect.poll(() => b.hget(`${prefix}mcp-tool-headers`, 'get_agent_status')).not.toBeNull();
    expect(two.mayRecall('get_agent_status')).toBe(true);
    expect(two.paramHeadersOf('get_agent_status')).toBeUndefined();
    await two.recall('get_agent_status');
    expect(two.paramHeadersOf('get_agent_status')).toEqual([{ name: 'agent-id', path: ['agent_id'] }]);
    expect(two.mayRecall('get_agent_status')).toBe(false);
    // A schema the revision forbids stays uncheckable on every replica.
    await two.recall('broken');
    expect(two.paramHeadersOf('broken')).toBe('invalid');
    expect(two.mayRecall('broken')).toBe(false);
    // A tool no replica has seen stays unknown.
    await two.recall('never_listed');
    expect(two.paramHeadersOf('never_listed')).toBeUndefined();
  });

  it('an entry that is not one the gateway wrote is ignored, and a Redis that cannot be asked leaves the tool unknown', async () => {
    await a.hset(`${prefix}mcp-tool-headers`, 'tampered', '[{"name":5}]');
    const two = replica(b);
    await two.recall('tampered');
    expect(two.paramHeadersOf('tampered')).toBeUndefined();
    const closed = createRedisConnection(redisUrl()!, { name: 'test:tool-schemas-closed' });
    await ready(closed);
    await closeRedisConnection(closed);
    const errors: unknown[] = [];
    const away = new ToolParamHeaders({ shared: new RedisToolSchemas({ redis: closed, prefix, onError: (error) => void errors.push(error) }) });
    await away.recall('get_agent_status');
    expect(away.paramHeadersOf('get_agent_status')).toBeUndefined();
    expect(errors.length).toBeGreaterThan(0);
  });
});
