-- latchkey: write a value to a fenced resource only if the writer's fencing
-- token is at least the highest token the resource has seen.
--
-- KEYS[1]  resource key: a hash with fields `value` and `fence`
-- ARGV[1]  the writer's fencing token, decimal, no leading zeros (u64)
-- ARGV[2]  the value to store
--
-- Returns
--   {1, token}  accepted: `value` and `fence` were set
--   {0, seen}   rejected: a write with the higher token `seen` came first;
--               nothing was changed
-- Errors
--   WRONGTYPE  the key exists but is not a hash.
--
-- Tokens are compared as decimal strings (longer is larger, then
-- lexicographic), not as Lua numbers, which are doubles and would round
-- tokens above 2^53.
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local seen = redis.call('HGET', KEYS[1], 'fence')
if seen and greater(seen, ARGV[1]) then
  return {0, seen}
end
redis.call('HSET', KEYS[1], 'value', ARGV[2], 'fence', ARGV[1])
return {1, ARGV[1]}
