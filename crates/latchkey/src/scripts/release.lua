-- latchkey: release a lock only if the caller still owns it, and wake waiters.
--
-- KEYS[1]  lock key
-- ARGV[1]  owner token
-- ARGV[2]  release channel (PUBLISHed to on success so waiters wake at once)
--
-- Returns
--    1  released (and a wake-up was published)
--    0  not released: the key is gone (the lock expired)
--   -1  not released: someone else holds the lock now
-- Errors
--   WRONGTYPE  the key exists but is not a string.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
elseif holder then
  return -1
end
return 0
