-- latchkey: extend a lock's TTL only if the caller still owns it.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token (the key may hold it marked by a waiter: token .. '+w')
-- ARGV[2]  new TTL in milliseconds, counted from now (replaces the remaining TTL)
--
-- Returns
--    1  extended
--    0  not extended: the key is gone (the lock expired)
--   -1  not extended: someone else holds the lock now
-- Errors
--   WRONGTYPE  the key exists but is not a string.
local holder = redis.call('GET', KEYS[1])
if ours(holder, ARGV[1]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
elseif holder then
  return -1
end
return 0
