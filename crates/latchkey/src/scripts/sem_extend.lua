-- latchkey: renew one hold of a semaphore (one permit, or k taken at
-- once), if it is still held.
--
-- KEYS[1]  permits key (see sem_acquire.lua)
-- ARGV[1]  owner token
-- ARGV[2]  TTL in milliseconds: the hold now expires ARGV[2] ms from now
-- ARGV[3]  k, the permits the hold took; its members
--          are the token and token .. '#2' … token .. '#k'
--
-- Returns
--   1  renewed (every member of the hold)
--   0  not renewed: the hold expired (its members are removed if still
--      there) or was never held
-- Errors
--   WRONGTYPE  the permits key is not a sorted set.
local now = now_ms()
local k = tonumber(ARGV[3])
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) <= now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  for i = 2, k do redis.call('ZREM', KEYS[1], ARGV[1] .. '#' .. i) end
  return 0
end
local expiry = string.format('%.0f', now + tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[1])
-- XX: a member gone (deleted by hand) is not taken back behind others' backs.
for i = 2, k do redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[1] .. '#' .. i) end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
