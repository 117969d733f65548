-- latchkey: hand a signal to one waiter on a name, picked at random.
--
-- KEYS: none (only pub/sub channels are touched).
-- ARGV[1]: glob of the name's waiter channels (escaped; see signal_wire.rs)
-- ARGV[2]: a random non-negative integer below 2^53 from the client
--          (math.random is not random per call on every Redis version)
-- ARGV[3]: the message (envelope and payload)
--
-- Returns: 0 when nobody waits on the name (nothing is published);
-- otherwise what PUBLISH returned for the chosen waiter's channel (1, or
-- more if other programs subscribe to that very channel).

local channels = redis.call('PUBSUB', 'CHANNELS', ARGV[1])
if #channels == 0 then
  return 0
end
local pick = math.fmod(tonumber(ARGV[2]), #channels) + 1
return redis.call('PUBLISH', channels[pick], ARGV[3])
