-- latchkey: raise a fencing counter to at least a given value (Redlock's
-- strict fencing: once a majority issued a hold's token, at acquisition or
-- on request, their counters are raised to the token handed out, the
-- maximum of theirs, so any later majority meets one).
--
-- KEYS[1]  fencing counter key (plain string holding an integer; may be missing)
-- ARGV[1]  the value to raise it to (integer >= 0, below 2^53)
--
-- Returns
--   the counter after the call: max(counter, ARGV[1]). It never goes down.
-- Errors
--   WRONGTYPE  the counter exists but is not a string.
local current = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
local floor = tonumber(ARGV[1])
if floor > current then
  -- %.0f: see acquire.lua (exact for integers below 2^53).
  redis.call('SET', KEYS[1], string.format('%.0f', floor))
  return floor
end
return current
