-- latchkey: take one permit of a counting semaphore whose permits are
-- leases, if fewer than N are held; expired permits are pruned first.
--
-- KEYS[1]  permits key: a sorted set, one member per permit held (the
--          holder's owner token), scored by its expiry in server
--          milliseconds (TIME); the key itself expires with its last permit
-- KEYS[2]  fencing counter (plain string holding the last token issued)
-- ARGV[1]  owner token (unique per hold)
-- ARGV[2]  N, the permits (an integer from 1 to MAX_COUNT; each caller
--          passes its own: see docs/protocol.md, "Semaphores")
-- ARGV[3]  TTL of the permit in milliseconds
-- ARGV[4]  '1': issue a fencing token; '0': do not (KEYS[2] untouched)
--
-- Returns
--   {1, fencing_token}  acquired; fencing_token = max(counter + 1, server
--                       time in µs), stored in KEYS[2], as for locks
--                       (acquire.lua); 0 when not asked
--   {0, wait_ms}        N permits are held; the earliest expires in wait_ms
--                       (a waiter sleeps at most that long)
-- Errors
--   WRONGTYPE  the permits key is not a sorted set.
--   BADFENCE latchkey: …  (issuing) the counter does not hold a token; the
--                       permit is not taken.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[2]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(tonumber(first[2]) - now, 1)}
end
local fence = 0
if ARGV[4] == '1' then
  local stored = redis.pcall('GET', KEYS[2])
  if type(stored) == 'table' and stored.err then stored = '' end
  local last = 0
  if stored then last = tonumber(stored) end
  if not last or last < 0 or last >= 9007199254740992 or last ~= math.floor(last) then
    return redis.error_reply('BADFENCE latchkey: the fencing counter ' .. KEYS[2] ..
      ' does not hold a token (an integer below 2^53); delete it to reset the semaphore')
  end
  fence = math.max(last + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
  redis.call('SET', KEYS[2], string.format('%.0f', fence))
end
redis.call('ZADD', KEYS[1], string.format('%.0f', now + tonumber(ARGV[3])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return {1, fence}
