-- latchkey: read one lock's state atomically, for inspection (`latchkey status`, `list`).
-- Read-only: changes nothing.
--
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter key
-- KEYS[3]  optional: the layout 2 counter, read when KEYS[2] is missing
--
-- Returns {value, pttl, fence}
--   value  the lock key's value (the holder's owner token), or nil when the lock is free
--   pttl   the lock key's remaining TTL in ms (-2: no such key, -1: held without a TTL)
--   fence  the fencing counter (the last fencing token issued), or nil when the name
--          was never acquired (or the counter key is not a string)
-- Errors
--   WRONGTYPE  the lock key exists but is not a string.
local kind = redis.call('TYPE', KEYS[1]).ok
local value = false
if kind == 'string' then
  value = redis.call('GET', KEYS[1])
elseif kind ~= 'none' then
  return redis.error_reply('WRONGTYPE lock key holds a value that is not a string')
end
local fence = false
if redis.call('TYPE', KEYS[2]).ok == 'string' then
  fence = redis.call('GET', KEYS[2])
elseif KEYS[3] and redis.call('TYPE', KEYS[3]).ok == 'string' then
  -- A lock whose tokens only 0.2 clients issued so far.
  fence = redis.call('GET', KEYS[3])
end
return {value, redis.call('PTTL', KEYS[1]), fence}
