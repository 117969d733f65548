-- latchkey: give one hold of a semaphore back (one permit, or k taken at
-- once, all together) and wake the waiters.
--
-- KEYS[1]  permits key (see sem_acquire.lua)
-- ARGV[1]  owner token
-- ARGV[2]  the publish command: 'PUBLISH' (or 'SPUBLISH')
-- ARGV[3]  the released channel
-- ARGV[4]  k, the permits the hold took; its members
--          are the token and token .. '#2' … token .. '#k'
--
-- Returns
--   1  released: the hold was held and unexpired; 'released' published
--   0  not released: the hold had expired (its members are removed;
--      'released' is published all the same, permits are free) or was
--      never held
-- Errors
--   WRONGTYPE  the permits key is not a sorted set.
local now = now_ms()
local k = tonumber(ARGV[4])
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
for i = 2, k do redis.call('ZREM', KEYS[1], ARGV[1] .. '#' .. i) end
-- pcall: the wake-up is a hint; waiters also wake at the earliest expiry.
publish_on(ARGV[2], ARGV[3], 'released')
if tonumber(score) <= now then return 0 end
return 1
