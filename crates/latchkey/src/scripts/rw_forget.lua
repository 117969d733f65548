-- latchkey: a waiter of a read-write lock that gave up (timed out,
-- cancelled) withdraws its intent, so that it no longer holds others back.
--
-- KEYS[1]  writers waiting
-- KEYS[2]  readers waiting
-- KEYS[3]  readers next
-- ARGV[1]  the waiter's token
-- ARGV[2]  the publish command, 'PUBLISH' (or 'SPUBLISH')
-- ARGV[3]  the released channel: a withdrawn writer's intent or place in
--          the readers next wakes the waiters it held back ('released'), who
--          would otherwise sleep on until their recheck (up to a third of
--          the TTL)
--
-- Returns the number of entries removed (0 to 2).
local writer = redis.call('ZREM', KEYS[1], ARGV[1])
local reader = redis.call('ZREM', KEYS[2], ARGV[1])
local batch = redis.call('SREM', KEYS[3], ARGV[1])
-- A reader's intent holds nobody back: only these two wake anyone.
if writer + batch > 0 then publish_on(ARGV[2], ARGV[3], 'released') end
return writer + reader + batch
