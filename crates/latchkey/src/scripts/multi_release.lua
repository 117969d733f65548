-- latchkey: release every lock of a multi hold (Client::lock_all) that the
-- caller still owns, and wake each lock's waiters, if any asked to be woken,
-- as release.lua does for one lock.
--
-- KEYS[1..n]  the lock keys
-- ARGV[1]     owner token
-- ARGV[2]     the publish command: 'PUBLISH', or 'SPUBLISH' on a Redis Cluster
-- ARGV[2+i]   lock i's release channel: 'released' is published there when
--             a waiter marked the token in KEYS[i] with '+w'.
--
-- Returns
--    1  every lock was ours: all released
--    0  the locks still ours were released; some were gone (expired or revoked)
--   -1  the locks still ours were released; someone else holds at least one
-- Errors
--   WRONGTYPE  a lock key exists but is not a string (nothing released).
local holders = {}
for i = 1, #KEYS do holders[i] = redis.call('GET', KEYS[i]) end
local outcome = 1
for i = 1, #KEYS do
  local holder = holders[i]
  if holder == ARGV[1] then
    redis.call('DEL', KEYS[i])
  elseif holder == ARGV[1] .. '+w' then
    redis.call('DEL', KEYS[i])
    -- pcall: the wake-up is only a hint (see release.lua).
    publish_on(ARGV[2], ARGV[2 + i], 'released')
  elseif holder then
    outcome = -1
  elseif outcome == 1 then
    outcome = 0
  end
end
return outcome
