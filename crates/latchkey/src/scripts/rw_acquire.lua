-- latchkey: one attempt at a read-write lock, as a reader or a writer.
-- Policy (phase-fair): a waiting writer stops new readers from entering; a
-- writer's release lets the readers waiting at that moment (a batch) in
-- before the next writer.
--
-- KEYS[1]  writer: a plain string holding the writer's token, with PX ttl
-- KEYS[2]  readers: sorted set, reader token -> expiry (server ms)
-- KEYS[3]  writers waiting: sorted set, token -> expiry of the intent
-- KEYS[4]  readers waiting: sorted set, token -> expiry of the intent
-- KEYS[5]  readers next: a set of reader tokens let in before the next
--          writer (made by rw_release_write.lua), with PX ttl
-- KEYS[6]  fencing counter of the writers (as a lock's)
-- KEYS[7]  optional: the writer's acquired record (string '<server ms>:<owner
--          token>', PX 24 h), written when a writer that waited (an intent)
--          gets the lock, so inspection counts its hold from then, not from
--          when it started waiting (its token's time)
-- ARGV[1]  'r' (read) or 'w' (write)
-- ARGV[2]  owner token
-- ARGV[3]  TTL in milliseconds (of the hold, and of a waiting intent)
-- ARGV[4]  '1': issue a fencing token (writers); '0': do not
-- ARGV[5]  '1': the caller waits: when refused, record (or refresh) its
--          intent for ARGV[3] ms; '0': do not
--
-- Returns
--   {1, fencing_token}  acquired (fencing_token 0 unless issued); also when
--                       the token holds already (an earlier attempt of the
--                       same wait took it and its reply was lost): renewed
--                       for ARGV[3] ms and granted again, not refused by
--                       its own hold until its TTL
--   {0, wait_ms}        refused; try again within wait_ms (the earliest
--                       expiry that could let us in, at most a third of the
--                       TTL so that a waiting intent is refreshed in time)
-- Errors
--   WRONGTYPE  a key holds the wrong type.
--   BADFENCE latchkey: …  the writers' fencing counter holds no token.
local t = redis.call('TIME')
local now = ms_of(t)
local ttl = tonumber(ARGV[3])
local token = ARGV[2]
for k = 2, 4 do redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', now) end
local writer = redis.call('GET', KEYS[1])
-- Our own write hold (a lost reply's): taken again below, as if free.
if writer == token then writer = false end
local function earliest(key, wait)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then return math.min(wait, math.max(tonumber(first[2]) - now, 1)) end
  return wait
end
local function refused(intents, wait)
  if ARGV[5] == '1' then
    redis.call('ZADD', intents, string.format('%.0f', now + ttl), token)
    redis.call('PEXPIRE', intents, ttl)
  end
  return {0, math.max(math.floor(wait), 1)}
end
local function hold_until(key)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, last[2])
end
local wait = math.floor(ttl / 3)
if writer then wait = math.min(wait, math.max(redis.call('PTTL', KEYS[1]), 1)) end

if ARGV[1] == 'r' then
  local next_batch = redis.call('SISMEMBER', KEYS[5], token) == 1
  -- Our own read hold (a lost reply's; pruned above if expired): it was let
  -- in by the policy already, so a writer's intent since does not refuse it
  -- (a writer holding still does).
  local ours = redis.call('ZSCORE', KEYS[2], token)
  if writer or (not ours and redis.call('ZCARD', KEYS[3]) > 0 and not next_batch) then
    return refused(KEYS[4], earliest(KEYS[3], wait))
  end
  redis.call('ZADD', KEYS[2], string.format('%.0f', now + ttl), token)
  hold_until(KEYS[2])
  redis.call('ZREM', KEYS[4], token)
  redis.call('SREM', KEYS[5], token)
  return {1, 0}
end

if writer or redis.call('ZCARD', KEYS[2]) > 0 or redis.call('SCARD', KEYS[5]) > 0 then
  if redis.call('SCARD', KEYS[5]) > 0 then
    wait = math.min(wait, math.max(redis.call('PTTL', KEYS[5]), 1))
  end
  return refused(KEYS[3], earliest(KEYS[2], wait))
end
local fence, bad = 0, nil
if ARGV[4] == '1' then fence, bad = fence_issue(KEYS[6], t) end
if bad then return bad end
redis.call('SET', KEYS[1], token, 'PX', ttl)
if redis.call('ZREM', KEYS[3], token) == 1 and KEYS[7] then
  redis.call('SET', KEYS[7], string.format('%d', now) .. ':' .. token, 'PX', 86400000)
end
return {1, fence}
