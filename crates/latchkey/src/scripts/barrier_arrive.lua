-- latchkey: one party arrives at a barrier; the last of the parties
-- releases the generation and starts the next one, clean.
--
-- KEYS[1]  barrier key: a hash with fields 'parties' (N), 'gen' (the
--          current generation, from 0), 'arrived' (how many parties of
--          the current generation arrived) and one field 'a:' + token per
--          party arrived (so that exactly that arrival can be taken back)
-- ARGV[1]  the parties N (an integer from 1 to MAX_COUNT)
-- ARGV[2]  TTL in milliseconds: reset on every arrival, so an abandoned
--          barrier disappears ARGV[2] ms after its last arrival
-- ARGV[3]  the publish command: 'PUBLISH' (or 'SPUBLISH')
-- ARGV[4]  the released channel
-- ARGV[5]  the party's token (unique per arrival)
--
-- Returns
--   {gen, 1}  this arrival was the N-th: generation gen is released (the
--             hash now holds only 'parties', 'gen' = gen + 1 and 'arrived' =
--             0) and gen was published on ARGV[4]
--   {gen, 0}  arrived in generation gen; wait for gen on ARGV[4]
-- Errors
--   WRONGTYPE   the key is not a hash, or its fields are not counts.
--   BADPARTIES <n>  the current generation was started with n parties, not
--               ARGV[1] (nothing changed)
local stored = redis.call('HMGET', KEYS[1], 'parties', 'gen', 'arrived')
local parties = tonumber(ARGV[1])
local function count(v)
  if not v then return 0 end
  local n = tonumber(v)
  if not n or n < 0 or n ~= math.floor(n) then return nil end
  return n
end
local sp, gen, arrived = count(stored[1]), count(stored[2]), count(stored[3])
if not sp or not gen or not arrived then
  return redis.error_reply('WRONGTYPE barrier key does not hold a barrier')
end
if stored[1] and sp ~= parties then
  return redis.error_reply('BADPARTIES ' .. string.format('%d', sp))
end
arrived = arrived + 1
if arrived >= parties then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'parties', ARGV[1], 'gen', string.format('%d', gen + 1), 'arrived', '0')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.pcall(ARGV[3], ARGV[4], string.format('%d', gen))
  return {gen, 1}
end
redis.call('HSET', KEYS[1], 'parties', ARGV[1], 'gen', string.format('%d', gen), 'arrived', string.format('%d', arrived), 'a:' .. ARGV[5], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {gen, 0}
