-- latchkey: a waiter of a read-write lock that gave up (timed out,
-- cancelled) withdraws its intent, so that it no longer holds others back.
--
-- KEYS[1]  writers waiting
-- KEYS[2]  readers waiting
-- KEYS[3]  readers next
-- ARGV[1]  the waiter's token
--
-- Returns the number of entries removed (0 to 2).
return redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1]) +
  redis.call('SREM', KEYS[3], ARGV[1])
