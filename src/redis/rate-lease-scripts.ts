/**
 * The shared count of a rate limit in Redis (docs/adr/0025-rate-limits.md): one sorted set
 * (KEYS[1]) whose members carry their own count, `<name>:<count>`, scored with the time (in
 * Redis's clock) until which a request they hold may have been made. An entry counts until its
 * score is more than an interval old. One key, so nothing can lose half of the count (an
 * eviction takes the whole key with it). Two kinds of member:
 *
 * - `l:<replica>:<n>:<count>`: a lease, slots granted to one replica, scored with the end of
 *   the lease (the grant's time + the lease's length): no slot of it is used later;
 * - `b:<period>:<count>`: used slots given back, grouped by the period (a 64th of the
 *   interval) their last use fell in, scored with the latest use of any of them.
 *
 * Redis's own clock (TIME) stamps everything, so the replicas' clocks never have to agree.
 */

/** The milliseconds of Redis's clock, and the count a member carries. */
const HELPERS = `
local function clock()
  local now = redis.call('TIME')
  return tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
end
local function count_of(member)
  return tonumber(string.match(member, ':(%d+)$'))
end`;

/**
 * LEASE: ARGV = requests, interval (ms), slots wanted, lease length (ms), lease name, slots
 * needed at least. Drops what stopped counting, grants up to the slots wanted that still fit
 * the limit, none when fewer than needed fit (a batch needing more than is left takes nothing
 * the others could use), and answers {granted, left after the grant, ms until the slots
 * needed would fit (when none was granted), ms until the oldest entry stops counting}.
 */
export const LEASE = `${HELPERS}
local now = clock()
local limit, per, want, lease, least = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - per))
local entries = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local used = 0
for i = 1, #entries, 2 do used = used + count_of(entries[i]) end
local grant = 0
if limit - used >= least then grant = math.min(want, limit - used) end
if grant > 0 then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[5] .. ':' .. grant)
  used = used + grant
end
local wait, reset = 0, 0
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first > 0 then reset = math.max(0, tonumber(first[2]) + per - now + 1) end
if grant == 0 then
  local excess = used + least - limit
  wait = per
  for i = 1, #entries, 2 do
    excess = excess - count_of(entries[i])
    if excess <= 0 then
      wait = math.max(1, tonumber(entries[i + 1]) + per - now + 1)
      break
    end
  end
end
redis.call('PEXPIRE', KEYS[1], per + lease + 1000)
return {grant, limit - used, wait, reset}`;

/**
 * RETURN: ARGV = lease name (with its count), lease length (ms), group length (ms), then for
 * each group of uses: the ms after the replica asked for the lease of its last use, and how
 * many. Ends a lease: its unused slots stop counting at once; its used ones are stamped with
 * the grant's time plus that offset (the replica measured it from before it asked, so the stamp
 * is never before the use), at most the lease's end and now, and added to the group of that
 * period. A lease already gone (it stopped counting) is left alone. Answers the slots kept.
 */
export const RETURN = `${HELPERS}
local ends = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not ends then return 0 end
ends = tonumber(ends)
local now = clock()
local granted_at = ends - tonumber(ARGV[2])
local period = tonumber(ARGV[3])
redis.call('ZREM', KEYS[1], ARGV[1])
local kept = 0
for i = 4, #ARGV, 2 do
  local stamp = math.min(granted_at + tonumber(ARGV[i]), ends, now)
  local count = tonumber(ARGV[i + 1])
  local group = math.floor(stamp / period)
  local prefix = 'b:' .. group .. ':'
  -- A group's score lies in its own period: only that period's entries need be looked at.
  local near = redis.call('ZRANGEBYSCORE', KEYS[1], group * period, '(' .. ((group + 1) * period), 'WITHSCORES')
  for j = 1, #near, 2 do
    if string.sub(near[j], 1, #prefix) == prefix then
      count = count + count_of(near[j])
      stamp = math.max(stamp, tonumber(near[j + 1]))
      redis.call('ZREM', KEYS[1], near[j])
      break
    end
  end
  redis.call('ZADD', KEYS[1], stamp, prefix .. count)
  kept = kept + tonumber(ARGV[i + 1])
end
return kept`;
