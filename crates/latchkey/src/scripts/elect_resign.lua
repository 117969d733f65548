-- latchkey: step down, only if the caller leads (compare-and-delete).
--
-- KEYS[1]  lease key   (see elect_campaign.lua)
-- KEYS[2]  state hash
-- ARGV[1]  owner token of the leader
-- ARGV[2]  change channel
-- ARGV[3]  the publish command: 'PUBLISH', or 'SPUBLISH' on a Redis Cluster
-- ARGV[4]  'revoked': an operator's revocation: 'revoked' is published
--          before the change (the leader's watch learns why it ended; an
--          observer that cannot parse it reads the state again); '' or
--          absent: the leader resigns
--
-- Returns
--    1  resigned: the lease is deleted, the leader fields of the hash
--       cleared, the change counted and '<change> -' published (candidates
--       and observers wake at once)
--    0  not ours: the lease had run out (if the record was still ours it is
--       cleared and the change published all the same)
--   -1  not ours: someone else leads now
-- Errors
--   WRONGTYPE  a key exists with the wrong type.
local holder = redis.call('GET', KEYS[1])
local reply = 1
if holder ~= ARGV[1] then
  if holder then return -1 end
  reply = 0
  if redis.call('HGET', KEYS[2], 'token') ~= ARGV[1] then return 0 end
end
redis.call('DEL', KEYS[1])
local change = (tonumber(redis.call('HGET', KEYS[2], 'change')) or 0) + 1
redis.call('HDEL', KEYS[2], 'token', 'value', 'term', 'since')
redis.call('HSET', KEYS[2], 'change', string.format('%.0f', change))
local function publish(message)
  publish_on(ARGV[3], ARGV[2], message)
end
if ARGV[4] == 'revoked' then publish('revoked') end
publish(string.format('%.0f -', change))
return reply
