-- latchkey: a fair lock's waiter leaves the queue (its wait timed out,
-- failed or was cancelled): its entry is taken out, and a lock that was
-- handed to it in that instant is released as by fair_release.lua (handed
-- to the next live waiter, or freed). The hand-on, the KEYS and the queue's
-- entries: shared/hand_on.lua. See docs/protocol.md, "Fair locks".
--
-- KEYS[1..5]  lock key, queue, leases, fencing counter, acquired record
-- ARGV[1..4]  as fair_release.lua: the waiter's owner token, publish
--             command, hand-off channel stem, release channel
-- ARGV[5]  the waiter's entry
--
-- Returns (as fair_release.lua, for the lock handed to the waiter)
--    2  it held the lock: handed to the next live waiter
--    1  it held the lock: freed (nobody live waited)
--    0  it did not hold the lock, which is free
--   -1  it did not hold the lock: someone else does
-- Errors
--   WRONGTYPE  the lock key, queue or leases hold the wrong type.
if redis.call('ZREM', KEYS[3], ARGV[5]) == 1 then
  redis.call('LREM', KEYS[2], 1, ARGV[5])
end
return release_as(ARGV[1], ARGV[2], ARGV[3], ARGV[4])
