-- latchkey: release a lock only if the caller still owns it, and wake a
-- waiter, if any asked to be woken: one waiting process, or every one.
--
-- KEYS[1]  lock key
-- KEYS[2]  optional: the lock's waiting processes (shared/mark.lua), and
-- KEYS[3]  the lock's fair queue: while it exists, fair waiters (which
--          listen on the release channel only) wait too, so every waiter
--          is woken
-- ARGV[1]  owner token
-- ARGV[2]  release channel (PUBLISHed to on success if a waiter marked the
--          token with '+w' and no waiting process heard its own wake-up,
--          so that every waiter wakes; see acquire.lua)
-- ARGV[3]  the publish command: 'PUBLISH', or 'SPUBLISH' on a Redis Cluster
--          (sharded pub/sub: the message stays on the lock's shard)
-- A process's wake channel is KEYS[2] .. ':' .. its 16 hex digits (the
-- stem derived here: every release sends its arguments, and each one
-- costs the client). The releasing process may be woken too, if it is
-- registered: its waiter, woken locally already, takes its turn either
-- way, and the next release wakes another.
-- With KEYS[2], a marked release first wakes the first waiting process
-- still listening (wake_one); only when none hears it, or a fair queue
-- waits, the release channel.
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
  local queued = KEYS[3] and redis.pcall('EXISTS', KEYS[3]) ~= 0
  if KEYS[2] and not queued and wake_one(KEYS[2], ARGV[3]) then
    return 1
  end
  publish_on(ARGV[3], ARGV[2], 'released')
  return 1
elseif holder then
  return -1
end
return 0
