-- latchkey: broadcast a signal and count who heard it.
--
-- KEYS: none (only pub/sub channels are touched).
-- ARGV[1]: the name's broadcast channel      P .. "signal:" .. name
-- ARGV[2]: glob of the name's waiter channels (escaped; see signal_wire.rs)
-- ARGV[3]: length of a waiter channel before its 32-hex-digit waiter id,
--          whose first 16 digits name the waiter's connection
-- ARGV[4]: the message (envelope and payload)
--
-- Returns: the number of receivers: every latchkey waiter on the name once
-- (a connection carrying N waiters counts N, not 1), plus every other
-- subscriber PUBLISH reached (other connections on the channel, matching
-- pattern subscriptions). PUBLISH counts each latchkey connection once, so
-- that one is replaced by the connection's waiters:
--   heard = published - latchkey connections + latchkey waiters

local published = redis.call('PUBLISH', ARGV[1], ARGV[4])
local waiters = redis.call('PUBSUB', 'CHANNELS', ARGV[2])
local from = tonumber(ARGV[3]) + 1
local connections, count = {}, 0
for _, channel in ipairs(waiters) do
  local connection = string.sub(channel, from, from + 15)
  if not connections[connection] then
    connections[connection] = true
    count = count + 1
  end
end
local heard = published - count + #waiters
-- A connection between subscribing its waiter channel and the broadcast
-- channel is counted as a connection but was not published to.
if heard < 0 then heard = 0 end
return heard
