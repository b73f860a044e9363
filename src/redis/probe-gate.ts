import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { MemoryProbeGate, PROBE_CLAIMANTS_PER_SUBJECT, PROBE_WAIT_MEMORY_MS, type ProbeGate } from '../limits/probe-gate.ts';
import { DEFAULT_REDIS_PREFIX } from './identity-tier.ts';
import { isLateAnswer } from './late-answer.ts';

/** A subject's line outlives its last write by this much beyond what it remembers (slot, waits). */
const LINE_SLACK_MS = 5_000;
/** Claimant hashes are cut to this many base64url characters (96 bits): unique within 64 per subject. */
const CLAIMANT_ID_LENGTH = 16;

/**
 * MemoryProbeGate's rule as one atomic step for every replica, timed by Redis's own clock so
 * that the replicas' clocks do not matter (TIME before writes: Redis ≥ 5 replicates effects).
 * KEYS[1]: the subject's hash, field `slot` (when the slot is free again) and one field per
 * claimant, 'lastPassedAt:waitingSince:refusedAt' (0: never / not waiting).
 * ARGV: claimant field, interval ms, wait memory ms, max claimants, expiry ms. Returns 1 to pass.
 */
const TRY_PASS = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local me, interval, memory, max, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local function parse(value)
  local passed, since, refused = string.match(value, '^(%d+):(%d+):(%d+)$')
  return tonumber(passed), tonumber(since), tonumber(refused)
end
local function waiting(since, refused) return since > 0 and now - refused < memory end
local slotField = redis.call('HGET', KEYS[1], 'slot')
local slot = tonumber(slotField or '0')
local mine = redis.call('HGET', KEYS[1], me)
local passed, since, refused = 0, 0, 0
if mine then
  passed, since, refused = parse(mine)
elseif redis.call('HLEN', KEYS[1]) - (slotField and 1 or 0) >= max then
  -- Room for a new claimant: forget an idle one, else the one that passed most recently; never a waiting one.
  local all = redis.call('HGETALL', KEYS[1])
  local victim, victimPassed = nil, -1
  for i = 1, #all, 2 do
    if all[i] ~= 'slot' then
      local p, s, r = parse(all[i + 1])
      if not waiting(s, r) then
        if now - p >= memory then victim = all[i]; break end
        if p > victimPassed then victim, victimPassed = all[i], p end
      end
    end
  end
  if not victim then return 0 end
  redis.call('HDEL', KEYS[1], victim)
end
local ownSince = now
if waiting(since, refused) then ownSince = since end
local function refuse()
  redis.call('HSET', KEYS[1], me, passed .. ':' .. ownSince .. ':' .. now)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 0
end
if now < slot then return refuse() end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if all[i] ~= 'slot' and all[i] ~= me then
    local p, s, r = parse(all[i + 1])
    if waiting(s, r) and (p < passed or (p == passed and s < ownSince)) then return refuse() end
  end
end
redis.call('HSET', KEYS[1], 'slot', now + interval, me, now .. ':0:' .. refused)
redis.call('PEXPIRE', KEYS[1], ttl)
return 1`;

export interface RedisProbeGateOptions {
  redis: Redis;
  /** What is gated (`key_prefix`); part of the Redis key. */
  name: string;
  intervalMs: number;
  /** See ProbeGateOptions; tests shorten it. */
  waitMemoryMs?: number;
  prefix?: string;
  /** Told of each Redis failure; this replica's own gate then decides alone. */
  onError?: (error: unknown) => void;
  now?: () => number;
}

/**
 * A ProbeGate shared by all replicas: one attempt per subject per interval passes across the
 * whole deployment, in turns by claimant (see MemoryProbeGate). Redis decides whenever it
 * answers; this replica's own gate is told each decision, so that with Redis away it decides
 * alone, still letting at most one per interval through per replica. Subjects and claimants
 * (client addresses) are stored hashed: Redis holds no addresses.
 */
export class RedisProbeGate implements ProbeGate {
  readonly #redis: Redis;
  readonly #keyPrefix: string;
  readonly #args: [intervalMs: number, waitMemoryMs: number, maxClaimants: number, ttlMs: number];
  readonly #local: MemoryProbeGate;
  readonly #onError: (error: unknown) => void;

  constructor(options: RedisProbeGateOptions) {
    if (!/^[a-z_]+$/.test(options.name)) throw new RangeError('RedisProbeGate: name must be lower-case letters');
    this.#redis = options.redis;
    this.#keyPrefix = `${options.prefix ?? DEFAULT_REDIS_PREFIX}probe:${options.name}:`;
    const waitMemoryMs = options.waitMemoryMs ?? PROBE_WAIT_MEMORY_MS;
    const ttlMs = Math.max(options.intervalMs, waitMemoryMs) + LINE_SLACK_MS;
    this.#args = [options.intervalMs, waitMemoryMs, PROBE_CLAIMANTS_PER_SUBJECT, ttlMs];
    this.#local = new MemoryProbeGate({ intervalMs: options.intervalMs, waitMemoryMs, now: options.now });
    this.#onError = options.onError ?? (() => {});
  }

  async tryPass(subject: string, claimant: string): Promise<boolean> {
    try {
      const passed = Number(await this.#redis.eval(TRY_PASS, 1, this.#key(subject), hashed(claimant).slice(0, CLAIMANT_ID_LENGTH), ...this.#args)) === 1;
      this.#local.record(subject, claimant, passed);
      return passed;
    } catch (error) {
      this.#onError(error);
      // Away: this replica's own gate decides (synchronously, so concurrent callers cannot all
      // pass). Late: the slot may be held in Redis (by another replica, or by this very command),
      // so passing could double the rate.
      if (!isLateAnswer(error)) return this.#local.tryPassSync(subject, claimant);
      this.#local.record(subject, claimant, false);
      return false;
    }
  }

  #key(subject: string): string {
    return this.#keyPrefix + hashed(subject);
  }
}

function hashed(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}
