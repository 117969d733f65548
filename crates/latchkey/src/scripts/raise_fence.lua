-- latchkey: raise a fencing counter to at least a given value (Redlock's
-- strict fencing: once a majority issued a hold's token, at acquisition or
-- on request, their counters are raised to the token handed out, the
-- maximum of theirs, so any later majority meets one).
--
-- KEYS[1]  fencing counter key (plain string holding an integer; may be missing)
-- ARGV[1]  the value to raise it to (integer >= 0, below 2^53)
--
-- Returns
--   the counter after the call: max(counter, ARGV[1]). It never goes down;
--   raised, it expires as shared/fence.lua's fence_store says.
-- Errors
--   BADFENCE latchkey: … the counter holds something other than a token (an
--                        integer below 2^53), or is not a string; or ARGV[1]
--                        is not such an integer. Nothing is changed: a
--                        foreign or corrupt counter is refused as acquire.lua
--                        and issue_fence.lua refuse it, never overwritten.
local function token(value)
  local n = tonumber(value)
  if n and n >= 0 and n < 9007199254740992 and n == math.floor(n) then return n end
  return nil
end
local stored = redis.pcall('GET', KEYS[1])
local current = 0
if type(stored) == 'table' and stored.err then stored = '' end
if stored then current = token(stored) end
local floor = token(ARGV[1])
if not current or not floor then
  return redis.error_reply('BADFENCE latchkey: the fencing counter ' .. KEYS[1] ..
    ' does not hold a token (an integer below 2^53); delete it to reset the lock')
end
if floor > current then
  fence_store(KEYS[1], floor)
  return floor
end
return current
