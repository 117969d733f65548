-- latchkey: release a lock only if the caller still owns it, and wake the
-- waiters, if any asked to be woken.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
-- ARGV[2]  release channel (PUBLISHed to on success if a waiter marked the
--          token with '+w', so waiters wake at once; see acquire.lua)
-- ARGV[3]  the publish command: 'PUBLISH', or 'SPUBLISH' on a Redis Cluster
--          (sharded pub/sub: the message stays on the lock's shard)
--
-- Returns
--    1  released (and, if marked, a wake-up published if this user may publish)
--    0  not released: the key is gone (the lock expired)
--   -1  not released: someone else holds the lock now
-- Errors
--   WRONGTYPE  the key exists but is not a string.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  -- Nobody waits: no message (each one costs Redis, and every replica).
  redis.call('DEL', KEYS[1])
  return 1
elseif holder == ARGV[1] .. '+w' then
  redis.call('DEL', KEYS[1])
  -- pcall: the wake-up is only a hint. A user whose ACL forbids this
  -- channel must still be able to release (waiters then wake at the TTL or
  -- by polling), and scripts are not rolled back, so an error here would
  -- report a failure for a release that happened.
  publish_on(ARGV[3], ARGV[2], 'released')
  return 1
elseif holder then
  return -1
end
return 0
