-- latchkey: one party arrives at a barrier; the last of the parties
-- releases the generation and starts the next one, clean.
--
-- KEYS[1]  barrier key: a hash with fields 'parties' (N), 'gen' (the
--          current generation, from 0), 'arrived' (how many parties of
--          the current generation arrived) and one field 'a:' + token per
--          party arrived (so that exactly that arrival can be taken back),
--          and 'id': this barrier instance's identity, the token of the
--          arrival that found no 'id' (new in 0.4: a barrier made or
--          released by a 0.3 client has none until a 0.4 arrival). A
--          release keeps it; a barrier that is gone (TTL, a restart without
--          persistence) and made again gets another, so a party can tell
--          "released" from "made again" although generations repeat
-- ARGV[1]  the parties N (an integer from 1 to MAX_COUNT)
-- ARGV[2]  TTL in milliseconds: reset on every arrival, so an abandoned
--          barrier disappears ARGV[2] ms after its last arrival
-- ARGV[3]  the publish command: 'PUBLISH' (or 'SPUBLISH')
-- ARGV[4]  the released channel
-- ARGV[5]  the party's token (unique per arrival)
-- ARGV[6]  optional: how long in ms this party waits at most (plus a
--          margin): the key's TTL is raised to it while parties wait, so a
--          barrier never expires under a party that still waits for it
--
-- Returns (id: the barrier's 'id', as stored now)
--   {gen, 1, id}  this arrival was the N-th: generation gen is released (the
--             hash now holds only 'gen' = gen + 1, 'arrived' = 0 and 'id':
--             the next generation's first arrival stores its parties) and
--             gen was published on ARGV[4]; the key's TTL is ARGV[2], or
--             what it had left if more (the waits of the parties released)
--   {gen, 0, id}  arrived in generation gen; wait for gen on ARGV[4]
-- Errors
--   WRONGTYPE   the key is not a hash, or its fields are not counts.
--   BADPARTIES <n>  parties of the current generation wait, and it was
--               started with n parties, not ARGV[1] (nothing changed). With
--               nobody waiting, an arrival with another N starts the
--               generation with its N.
local stored = redis.call('HMGET', KEYS[1], 'parties', 'gen', 'arrived', 'id')
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
-- A stored N binds only the parties waiting now ('parties' of a generation
-- nobody waits in, as 0.3.0 left it, is not a promise to anybody).
if stored[1] and sp ~= parties and arrived > 0 then
  return redis.error_reply('BADPARTIES ' .. string.format('%d', sp))
end
local waiting = arrived > 0
-- An instance without an identity (new, or a 0.3 client's) takes this
-- arrival's token: unique per arrival, so never one a gone instance had.
local id = stored[4] or ARGV[5]
arrived = arrived + 1
if arrived >= parties then
  -- The released generation stays readable as long as its parties wait:
  -- one that missed the message reads the generation moved on (released),
  -- not a key gone at the barrier's TTL (which it would take for gone).
  local left = redis.call('PTTL', KEYS[1])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'gen', string.format('%d', gen + 1), 'arrived', '0', 'id', id)
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(ARGV[2]), left))
  local message = string.format('%d', gen)
  publish_on(ARGV[3], ARGV[4], message)
  return {gen, 1, id}
end
redis.call('HSET', KEYS[1], 'parties', ARGV[1], 'gen', string.format('%d', gen), 'arrived', string.format('%d', arrived), 'a:' .. ARGV[5], '1', 'id', id)
-- The TTL: ARGV[2], raised to this party's wait, and never lowered under
-- parties that wait already (their own arrivals raised it for their waits).
local keep = math.max(tonumber(ARGV[2]), tonumber(ARGV[6] or ARGV[2]))
local left = redis.call('PTTL', KEYS[1])
if not waiting or left < keep then
  redis.call('PEXPIRE', KEYS[1], keep)
end
return {gen, 0, id}
