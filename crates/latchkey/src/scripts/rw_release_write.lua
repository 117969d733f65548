-- latchkey: a writer releases a read-write lock: the readers waiting now
-- become the batch let in before the next writer; the waiters are woken.
--
-- KEYS[1]  writer (see rw_acquire.lua)
-- KEYS[2]  readers waiting
-- KEYS[3]  readers next
-- ARGV[1]  owner token
-- ARGV[2]  TTL in milliseconds (how long the batch waits for its readers)
-- ARGV[3]  the publish command: 'PUBLISH' (or 'SPUBLISH')
-- ARGV[4]  the released channel
--
-- Returns
--    1  released ('released' published)
--    0  not released: the writer key is gone (expired)
--   -1  not released: someone else writes now
-- Errors
--   WRONGTYPE  a key holds the wrong type.
local writer = redis.call('GET', KEYS[1])
if writer ~= ARGV[1] then
  if writer then return -1 end
  return 0
end
redis.call('DEL', KEYS[1])
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local waiting = redis.call('ZRANGE', KEYS[2], 0, -1)
if #waiting > 0 then
  redis.call('DEL', KEYS[3])
  for i = 1, #waiting, 1000 do
    redis.call('SADD', KEYS[3], unpack(waiting, i, math.min(i + 999, #waiting)))
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
publish_on(ARGV[3], ARGV[4], 'released')
return 1
