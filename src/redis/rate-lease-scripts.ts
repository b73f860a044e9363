/**
 * The shared count of a rate limit in Redis (docs/adr/0025-rate-limits.md): a sorted set of
 * entries (KEYS[1]: member → the time, in Redis's clock, until which its requests may still be
 * made) and a hash (KEYS[2]: member → how many requests it holds, and `n`, their total). An
 * entry counts until its time is more than an interval old. Two kinds of entry:
 *
 * - `l:<replica>:<n>`: a lease, slots granted to one replica, to be used before the time it
 *   carries (now + the lease's length);
 * - `b:<n>`: used slots given back, grouped by the period they were given back in, stamped with
 *   the latest time any of them was given back (never before one of them was used).
 *
 * Redis's own clock (TIME) stamps everything, so replicas' clocks never have to agree.
 */

/**
 * LEASE: ARGV = requests, interval (ms), slots wanted, lease length (ms), member.
 * Drops what stopped counting, grants up to the slots wanted that still fit the limit, and
 * answers {granted, left after the grant, ms until one more would fit (when none was granted),
 * ms until the oldest entry stops counting}.
 */
export const LEASE = `
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local limit, per, want, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local oldest = '(' .. (now - per)
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', oldest)
if #stale > 0 then
  local freed = 0
  for _, member in ipairs(stale) do
    freed = freed + tonumber(redis.call('HGET', KEYS[2], member) or '0')
    redis.call('HDEL', KEYS[2], member)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', oldest)
  redis.call('HINCRBY', KEYS[2], 'n', -freed)
end
local used = tonumber(redis.call('HGET', KEYS[2], 'n') or '0')
local grant = math.max(0, math.min(want, limit - used))
if grant > 0 then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[5])
  redis.call('HSET', KEYS[2], ARGV[5], grant)
  used = redis.call('HINCRBY', KEYS[2], 'n', grant)
end
local wait, reset = 0, 0
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then reset = math.max(0, tonumber(first[2]) + per - now + 1) end
if grant == 0 then
  local excess = used + 1 - limit
  local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  wait = per
  for i = 1, #entries, 2 do
    excess = excess - tonumber(redis.call('HGET', KEYS[2], entries[i]) or '0')
    if excess <= 0 then
      wait = math.max(1, tonumber(entries[i + 1]) + per - now + 1)
      break
    end
  end
end
local ttl = per + lease + 1000
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
return {grant, limit - used, wait, reset}`;

/**
 * RETURN: ARGV = member, slots used, group length (ms).
 * Ends a lease: its unused slots stop counting at once; its used ones go into the group of
 * this moment (stamped now, or the lease's own time if that is earlier). A lease already gone
 * (it stopped counting) is left alone. Answers the slots kept.
 */
export const RETURN = `
local granted = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if granted == 0 then return 0 end
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local used = math.min(tonumber(ARGV[2]), granted)
local until_ms = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or now)
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'n', used - granted)
if used > 0 then
  local stamp = math.min(until_ms, now)
  local group = 'b:' .. math.floor(stamp / tonumber(ARGV[3]))
  local prior = redis.call('ZSCORE', KEYS[1], group)
  if prior then stamp = math.max(stamp, tonumber(prior)) end
  redis.call('ZADD', KEYS[1], stamp, group)
  redis.call('HINCRBY', KEYS[2], group, used)
end
return used`;
