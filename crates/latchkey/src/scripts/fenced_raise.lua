-- latchkey: raise a fenced resource's fence without writing a value, so
-- that writes with a lower token are refused from now on (after a revoke:
-- the revoked holder's next write is refused at once).
--
-- KEYS[1]  resource key: a hash with fields `value` and `fence` (see
--          fenced_write.lua)
-- ARGV[1]  the token to raise the fence to, decimal, no leading zeros (u64)
--
-- Returns
--   the fence after the call, as a decimal string: the larger of the one
--   seen and ARGV[1] (it never goes down; `value` is left as it is)
-- Errors
--   WRONGTYPE  the key exists but is not a hash.
--
-- Tokens are compared as decimal strings, as in fenced_write.lua.
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local seen = redis.call('HGET', KEYS[1], 'fence')
if seen and not greater(ARGV[1], seen) then return seen end
redis.call('HSET', KEYS[1], 'fence', ARGV[1])
return ARGV[1]
