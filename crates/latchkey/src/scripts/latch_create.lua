-- latchkey: create a count-down latch, unless it exists.
--
-- KEYS[1]  latch key: a plain string holding the count left, a decimal
--          integer ('0' once the latch is open)
-- ARGV[1]  the count (an integer from 1 to MAX_COUNT, checked by the client)
-- ARGV[2]  TTL in milliseconds
--
-- Returns
--   {1, count}  created with the count ARGV[1], expiring after ARGV[2] ms
--   {0, left, pttl}  it existed already and is left as it was; left is its
--               count now (0: open, which the client refuses: a latch opens
--               once), pttl its remaining TTL in ms (-1: none)
-- Errors
--   WRONGTYPE  the key is not a string, or holds something other than a
--              count (another program uses the name).
local left = redis.call('GET', KEYS[1])
if left then
  local n = tonumber(left)
  if not n or n < 0 or n ~= math.floor(n) then
    return redis.error_reply('WRONGTYPE latch key does not hold a count')
  end
  return {0, n, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, tonumber(ARGV[1])}
