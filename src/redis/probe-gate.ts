import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryProbeGate, PROBE_CLAIMANTS_PER_SUBJECT, PROBE_NEWEST_RUN, PROBE_WAIT_MEMORY_MS, type ProbeGate } from '../limits/probe-gate.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';

/** A subject's line outlives its last write by this much beyond what it remembers (slot, waits). */
const LINE_SLACK_MS = 5_000;
/** Claimant hashes are cut to this many base64url characters (96 bits): unique within thousands per subject. */
const CLAIMANT_ID_LENGTH = 16;

/**
 * MemoryProbeGate's rule as one atomic step for every replica, timed by Redis's own clock so
 * that the replicas' clocks do not matter (TIME before writes: Redis >= 5 replicates effects).
 * Every step is O(log n) in the claimants of the subject, whatever their number: the ends of
 * two sorted sets, and the claimants found lapsed there leave them for good (amortised).
 * KEYS (one hash slot): [1] hash `slot`, `last` (last pass), `run` (newest-rule passes in a row);
 * [2] hash claimant -> 'firstSeen:lastPassed:refused' (0: never); [3] sorted set of refused
 * claimants that never passed, by first sight; [4] of those that passed, by last pass;
 * [5] every claimant by its last request (the least recent is forgotten past the limit).
 * ARGV: claimant, interval ms, wait memory ms, max claimants, expiry ms, newest run. Returns 1 to pass.
 */
const TRY_PASS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, interval, memory, max, ttl, run = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local meta, people, fresh, passedLine, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local function parse(value)
  local f, p, r = string.match(value, '^(%d+):(%d+):(%d+)$')
  return tonumber(f), tonumber(p), tonumber(r)
end
local first, passed = now, 0
local mine = redis.call('HGET', people, me)
if mine then
  first, passed = parse(mine)
elseif redis.call('ZCARD', active) >= max then
  local idle = redis.call('ZRANGE', active, 0, 0)[1]
  redis.call('HDEL', people, idle)
  redis.call('ZREM', fresh, idle)
  redis.call('ZREM', passedLine, idle)
  redis.call('ZREM', active, idle)
end
redis.call('ZADD', active, now, me)
if passed == 0 then redis.call('ZADD', fresh, first, me) else redis.call('ZADD', passedLine, passed, me) end
local function keep()
  for _, key in ipairs(KEYS) do redis.call('PEXPIRE', key, ttl) end
end
local function refuse()
  redis.call('HSET', people, me, first .. ':' .. passed .. ':' .. now)
  keep()
  return 0
end
local state = redis.call('HMGET', meta, 'slot', 'last', 'run')
local slot, last, newestRun = tonumber(state[1] or '0'), tonumber(state[2] or '0'), tonumber(state[3] or '0')
if now < slot then return refuse() end
-- The live claimant at one end of a line, with its score; those found lapsed there leave it.
local function liveEnd(line, newest)
  while true do
    local found
    if newest then found = redis.call('ZREVRANGE', line, 0, 0, 'WITHSCORES') else found = redis.call('ZRANGE', line, 0, 0, 'WITHSCORES') end
    if #found == 0 then return nil end
    local who = found[1]
    if who == me then return who, tonumber(found[2]) end
    local record = redis.call('HGET', people, who)
    if record then
      local _, _, r = parse(record)
      if r > 0 and now - r < memory then return who, tonumber(found[2]) end
    end
    redis.call('ZREM', line, who)
  end
end
local turn, byNewest = nil, false
local newest, newestFirst = liveEnd(fresh, true)
if newest and (newestRun == 0 or (newestRun < run and newestFirst > last)) then
  turn, byNewest = newest, true
else
  turn = liveEnd(fresh, false) or liveEnd(passedLine, false) or me
end
if turn ~= me then return refuse() end
local nextRun = 0
if byNewest then nextRun = newestRun + 1 end
redis.call('HSET', meta, 'slot', now + interval, 'last', now, 'run', nextRun)
redis.call('ZREM', fresh, me)
redis.call('ZREM', passedLine, me)
redis.call('HSET', people, me, first .. ':' .. now .. ':0')
keep()
return 1`;

export interface RedisProbeGateOptions {
  redis: Redis;
  /** What is gated (`key_prefix`); part of the Redis key. */
  name: string;
  intervalMs: number;
  /** See ProbeGateOptions; tests shorten it. */
  waitMemoryMs?: number;
  /** See ProbeGateOptions; tests lower it. */
  maxClaimants?: number;
  prefix?: string;
  /** Told of each Redis failure; this replica's own gate then decides alone. */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/** The five keys of one subject, in one hash slot (Redis Cluster). */
const LINE_PARTS = ['slot', 'claimants', 'fresh', 'passed', 'active'] as const;

/**
 * A ProbeGate shared by all replicas: one attempt per subject per interval passes across the
 * whole deployment, newest address first, the oldest in turn (see MemoryProbeGate). Redis
 * decides whenever it answers; this replica's own gate is told each decision, so that with Redis
 * down (or not answering within the command timeout, which is the same to every use of Redis here:
 * docs/replicas.md) it decides alone, still letting at most one per interval through per replica.
 * Subjects and claimants (client addresses) are stored hashed: Redis holds no addresses.
 */
export class RedisProbeGate implements ProbeGate {
  readonly #redis: Redis;
  readonly #keyPrefix: string;
  readonly #args: [intervalMs: number, waitMemoryMs: number, maxClaimants: number, ttlMs: number, newestRun: number];
  readonly #local: MemoryProbeGate;
  readonly #onError: (error: unknown) => void;

  constructor(options: RedisProbeGateOptions) {
    if (!/^[a-z_]+$/.test(options.name)) throw new RangeError('RedisProbeGate: name must be lower-case letters');
    this.#redis = options.redis;
    this.#keyPrefix = `${options.prefix ?? DEFAULT_REDIS_PREFIX}probe:${options.name}:`;
    const waitMemoryMs = options.waitMemoryMs ?? PROBE_WAIT_MEMORY_MS;
    const maxClaimants = options.maxClaimants ?? PROBE_CLAIMANTS_PER_SUBJECT;
    const ttlMs = Math.max(options.intervalMs, waitMemoryMs) + LINE_SLACK_MS;
    this.#args = [options.intervalMs, waitMemoryMs, maxClaimants, ttlMs, PROBE_NEWEST_RUN];
    this.#local = new MemoryProbeGate({ intervalMs: options.intervalMs, waitMemoryMs, maxClaimants, now: options.now });
    this.#onError = options.onError ?? (() => {});
  }

  async tryPass(subject: string, claimant: string): Promise<boolean> {
    // Not connected (down, or cut for not answering): decided here at once, no command sent.
    if (this.#redis.status !== 'ready') return this.#local.tryPassSync(subject, claimant);
    try {
      const keys = this.#keys(subject);
      const passed = Number(await this.#redis.eval(TRY_PASS, keys.length, ...keys, hashed(claimant).slice(0, CLAIMANT_ID_LENGTH), ...this.#args)) === 1;
      this.#local.record(subject, claimant, passed);
      return passed;
    } catch (error) {
      this.#onError(error);
      // Down, or too slow, which is down too: this replica's own gate decides (synchronously, so
      // concurrent callers cannot all pass). A script that ran late may have let one through in
      // Redis as well: at most one more verify in that interval, once per outage.
      return this.#local.tryPassSync(subject, claimant);
    }
  }

  #keys(subject: string): string[] {
    const line = `${this.#keyPrefix}{${hashed(subject)}}:`;
    return LINE_PARTS.map((part) => line + part);
  }
}

function hashed(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}
