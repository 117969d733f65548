-- latchkey: renew one permit of a semaphore, if it is still held.
--
-- KEYS[1]  permits key (see sem_acquire.lua)
-- ARGV[1]  owner token
-- ARGV[2]  TTL in milliseconds: the permit now expires ARGV[2] ms from now
--
-- Returns
--   1  renewed
--   0  not renewed: the permit expired (it is removed if still there) or
--      was never held
-- Errors
--   WRONGTYPE  the permits key is not a sorted set.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
