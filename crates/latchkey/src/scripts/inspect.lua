-- latchkey: read one lock's state atomically, for inspection (`latchkey status`, `list`).
-- Read-only: changes nothing.
--
-- KEYS[1]  lock key
-- KEYS[2]  fencing counter key
-- KEYS[3]  acquired record ('<server ms>:<owner token>', written when a queued
--          waiter got the lock: fair_release.lua, fair_acquire.lua)
--
-- Returns {value, pttl, fence, held_ms}
--   value  the lock key's value (the holder's owner token), or nil when the lock is free
--   pttl   the lock key's remaining TTL in ms (-2: no such key, -1: held without a TTL)
--   fence  the fencing counter (the last fencing token issued), or nil when the name
--          was never acquired (or the counter key is not a string)
--   held_ms  how long the holder has held the lock, by the server's clock, when
--          the acquired record names its token; nil otherwise (its token's time
--          then tells: the holder made the token when it took the lock)
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
end
local held = false
if value and redis.call('TYPE', KEYS[3]).ok == 'string' then
  local at, token = string.match(redis.call('GET', KEYS[3]), '^(%d+):(.+)$')
  if at and (value == token or value == token .. '+w') then
    local now = now_ms()
    held = math.max(now - tonumber(at), 0)
  end
end
return {value, redis.call('PTTL', KEYS[1]), fence, held}
