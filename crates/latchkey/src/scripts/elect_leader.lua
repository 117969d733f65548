-- latchkey: read an election's leader (read-only).
--
-- KEYS[1]  lease key   (see elect_campaign.lua)
-- KEYS[2]  state hash
--
-- Returns
--   {1, change, term, since_ms, pttl, value}  a leader, whose lease has pttl ms left
--   {0, change}                               no leader
--   {-1, change, pttl}                        the lease is held, but the record
--                                             is not its holder's (something
--                                             else wrote the key)
-- change: the change counter (0 when the hash does not exist).
-- Errors
--   WRONGTYPE  a key exists with the wrong type.
local holder = redis.call('GET', KEYS[1])
local state = redis.call('HMGET', KEYS[2], 'token', 'value', 'term', 'since', 'change')
local change = tonumber(state[5]) or 0
if holder and holder == state[1] then
  return {1, change, tonumber(state[3]) or 0, tonumber(state[4]) or 0,
    redis.call('PTTL', KEYS[1]), state[2] or ''}
end
if holder then return {-1, change, redis.call('PTTL', KEYS[1])} end
return {0, change}
