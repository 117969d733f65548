-- latchkey: count a latch down by one; the count that reaches 0 opens it
-- and publishes the opening.
--
-- KEYS[1]  latch key (see latch_create.lua)
-- ARGV[1]  the publish command: 'PUBLISH' (or 'SPUBLISH' on a cluster with
--          sharded pub/sub)
-- ARGV[2]  the opened channel
-- The key keeps the TTL its creator gave it (KEEPTTL).
--
-- Returns
--   n >= 0  the count left after this call; 0: this call opened the latch
--           and published 'opened' on ARGV[2]
--   -1      no such latch (never created, or gone at its TTL); nothing changed
--   -2      the latch is open already (the count would go below zero);
--           nothing changed
-- Errors
--   WRONGTYPE  the key is not a string, or holds something other than a count.
local left = redis.call('GET', KEYS[1])
if not left then return -1 end
local n = tonumber(left)
if not n or n < 0 or n ~= math.floor(n) then
  return redis.error_reply('WRONGTYPE latch key does not hold a count')
end
if n == 0 then return -2 end
n = n - 1
-- KEEPTTL: the latch lives as long as its creator said, whatever TTL the
-- counting client was made with.
redis.call('SET', KEYS[1], string.format('%d', n), 'KEEPTTL')
if n == 0 then
  -- pcall: the message is a wake-up hint; waiters also read the key.
  publish_on(ARGV[1], ARGV[2], 'opened')
end
return n
