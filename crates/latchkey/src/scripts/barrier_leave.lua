-- latchkey: a party that gave up waiting (timed out, cancelled) takes its
-- arrival back, unless its generation was released meanwhile.
--
-- KEYS[1]  barrier key (see barrier_arrive.lua)
-- ARGV[1]  the party's token, as given on arrival
--
-- Returns
--    1  withdrawn: its 'a:' field is gone and 'arrived' is one less (the
--       last one to leave also drops 'parties': with nobody waiting, the
--       next arrival may start the generation with another N)
--    0  nothing to withdraw: the generation it arrived in was released
--       (or it never arrived: a cancelled arrival that did not happen)
--   -1  nothing to withdraw: the barrier is gone (its TTL ran out)
-- Errors
--   WRONGTYPE  the key is not a hash.
if redis.call('HDEL', KEYS[1], 'a:' .. ARGV[1]) == 1 then
  if redis.call('HINCRBY', KEYS[1], 'arrived', -1) <= 0 then
    redis.call('HDEL', KEYS[1], 'parties')
  end
  return 1
end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
return -1
