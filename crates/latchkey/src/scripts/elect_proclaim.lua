-- latchkey: change the leader's value, only while the caller leads.
--
-- KEYS[1]  lease key   (see elect_campaign.lua)
-- KEYS[2]  state hash
-- ARGV[1]  owner token of the leader
-- ARGV[2]  the new value (any bytes)
-- ARGV[3]  change channel
-- ARGV[4]  the publish command: 'PUBLISH', or 'SPUBLISH' on a Redis Cluster
--
-- Returns
--   {1, change}  proclaimed (and '<change> <term> <since_ms> <pttl_ms> <value>'
--                published; pttl_ms: the lease's remaining TTL)
--   {0, 0}       not ours: the lease is gone (it ran out)
--   {-1, 0}      not ours: someone else leads now
-- Errors
--   WRONGTYPE    a key exists with the wrong type.
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder then return {-1, 0} end
  return {0, 0}
end
local state = redis.call('HMGET', KEYS[2], 'token', 'term', 'since', 'change')
if state[1] ~= ARGV[1] then
  -- The lease is ours but the record is not (something wrote the hash).
  return {-1, 0}
end
local change = (tonumber(state[4]) or 0) + 1
redis.call('HSET', KEYS[2], 'value', ARGV[2], 'change', string.format('%.0f', change))
local message = string.format('%.0f ', change) .. state[2] .. ' ' .. state[3] ..
  ' ' .. redis.call('PTTL', KEYS[1]) .. ' ' .. ARGV[2]
publish_on(ARGV[4], ARGV[3], message)
return {1, change}
