-- latchkey: extend every lock of a multi hold (Client::lock_all) at once,
-- only if the caller still owns every one of them.
--
-- KEYS[1..n]  the lock keys
-- ARGV[1]     owner token (a key may hold it marked by a waiter: token .. '+w')
-- ARGV[2]     new TTL in milliseconds, counted from now
--
-- Returns
--   {1, 0}    every lock extended (each TTL reset to ARGV[2]; marks stay)
--   {0, i}    none extended: lock i is gone (expired, deleted or revoked)
--   {-1, i}   none extended: someone else holds lock i now
-- Errors
--   WRONGTYPE a lock key exists but is not a string.
for i = 1, #KEYS do
  local holder = redis.call('GET', KEYS[i])
  if not ours(holder, ARGV[1]) then
    if holder then return {-1, i} end
    return {0, i}
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return {1, 0}
