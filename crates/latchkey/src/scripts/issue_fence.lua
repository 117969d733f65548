-- latchkey: issue the fencing token of a hold, only while the caller holds it.
--
-- KEYS[1]  lock key            (plain string holding the owner's token)
-- KEYS[2]  fencing counter key (plain string holding the last token issued, an integer)
-- ARGV[1]  owner token (the key may hold it marked by a waiter: token .. '+w')
--
-- Returns
--   {1, fencing_token}  we hold the lock; fencing_token = max(counter + 1,
--                       server time in µs), stored back in KEYS[2] (no TTL)
--                       so it never goes backwards (see docs/fencing.md).
--   {0, 0}              not issued: the key is gone (the lock expired)
--   {-1, 0}             not issued: someone else holds the lock now
-- Errors
--   WRONGTYPE           the lock key exists but is not a string.
--   BADFENCE latchkey: … the fencing counter holds something other than a
--                       token, or is not a string (nothing is changed).
-- Why "only while held": a token issued during our hold is smaller than any
-- token issued during a later hold, since that hold starts after ours ended
-- and its token is issued after that. A stale holder asking too late gets
-- nothing, not a token that would outrank the new holder's.
local holder = redis.call('GET', KEYS[1])
if not ours(holder, ARGV[1]) then
  if holder then return {-1, 0} end
  return {0, 0}
end
local last = fence_read(KEYS[2])
if not last then return fence_bad(KEYS[2]) end
local fence = fence_next(last, redis.call('TIME'))
fence_store(KEYS[2], fence)
return {1, fence}
