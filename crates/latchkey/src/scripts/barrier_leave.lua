-- latchkey: a party that gave up waiting (timed out, cancelled) takes its
-- arrival back, unless its generation was released meanwhile.
--
-- KEYS[1]  barrier key (see barrier_arrive.lua)
-- ARGV[1]  the party's token, as given on arrival
-- ARGV[2]  optional: the barrier's 'id' and ARGV[3] the generation, as
-- ARGV[3]  the arrival's reply gave them (absent when the reply never
--          came: an arrival cancelled in flight, whose answer is unused)
--
-- Returns
--    1  withdrawn: its 'a:' field is gone and 'arrived' is one less (the
--       last one to leave also drops 'parties': with nobody waiting, the
--       next arrival may start the generation with another N)
--    0  nothing to withdraw: the generation it arrived in was released
--       (the same barrier, by its 'id', is past ARGV[3]; or, without
--       ARGV[2], it exists: released, or it never arrived)
--   -1  nothing to withdraw: the barrier is gone (its TTL ran out, or a
--       restart without persistence) or was made again since (another
--       'id', or a generation not past ARGV[3]): nobody released the
--       party's generation, though generation numbers repeat
-- A barrier without 'id' (released by a 0.3 client) is compared by the
-- generation alone, as 0.3 did.
-- Errors
--   WRONGTYPE  the key is not a hash.
if redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1]) == 1 then
  if redis.call('HINCRBY', KEYS[1], 'arrived', -1) <= 0 then
    redis.call('HDEL', KEYS[1], 'parties')
  end
  return 1
end
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
if not ARGV[2] then return 0 end
local stored = redis.call('HMGET', KEYS[1], 'gen', 'id')
if stored[2] and stored[2] ~= ARGV[2] then return -1 end
local gen, mine = tonumber(stored[1]), tonumber(ARGV[3])
if gen and mine and gen > mine then return 0 end
return -1
