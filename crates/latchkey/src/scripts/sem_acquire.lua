-- latchkey: take k permits (one by default) of a counting semaphore whose
-- permits are leases, all or none: if at most N - k are held; expired
-- permits are pruned first.
--
-- KEYS[1]  permits key: a sorted set, one member per permit held (the
--          holder's owner token), scored by its expiry in server
--          milliseconds (TIME); the key itself expires with its last permit
-- KEYS[2]  fencing counter (plain string holding the last token issued)
-- ARGV[1]  owner token (unique per hold)
-- ARGV[2]  N, the permits (an integer from 1 to MAX_COUNT; each caller
--          passes its own: see docs/protocol.md, "Semaphores")
-- ARGV[3]  TTL of the permit in milliseconds
-- ARGV[4]  '1': issue a fencing token; '0': do not (KEYS[2] untouched)
-- ARGV[5]  k, the permits to take (1 to N). A hold of
--          k permits is k members, all scored alike: the token itself and
--          token .. '#2' … token .. '#k' (see docs/protocol.md, "Several
--          permits at once"), so that whoever counts members counts k
--
-- Returns
--   {1, fencing_token}  acquired; fencing_token = max(counter + 1, server
--                       time in µs), stored in KEYS[2], as for locks
--                       (acquire.lua); 0 when not asked
--   {0, wait_ms}        more than N - k permits are held; wait_ms: until
--                       enough of them have expired for k to fit (a waiter
--                       sleeps at most that long; a release wakes it sooner)
-- Errors
--   WRONGTYPE  the permits key is not a sorted set.
--   BADFENCE latchkey: …  (issuing) the counter does not hold a token; no
--                       permit is taken.
--   ERR latchkey: …     k is not an integer from 1 to N (clients check first).
local t = redis.call('TIME')
local now = ms_of(t)
local k = tonumber(ARGV[5])
if not k or k < 1 or k > tonumber(ARGV[2]) or k ~= math.floor(k) then
  return redis.error_reply('ERR latchkey: the permits to take must be an integer from 1 to N')
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held + k > tonumber(ARGV[2]) then
  -- The (held + k - N)-th soonest expiry frees enough; at least the first.
  -- (held >= 1 here, since k <= N.)
  local nth = math.min(held + k - tonumber(ARGV[2]), held) - 1
  local first = redis.call('ZRANGE', KEYS[1], nth, nth, 'WITHSCORES')
  return {0, math.max(tonumber(first[2]) - now, 1)}
end
local fence, bad = 0, nil
if ARGV[4] == '1' then fence, bad = fence_issue(KEYS[2], t) end
if bad then return bad end
local expiry = string.format('%.0f', now + tonumber(ARGV[3]))
redis.call('ZADD', KEYS[1], expiry, ARGV[1])
for i = 2, k do redis.call('ZADD', KEYS[1], expiry, ARGV[1] .. '#' .. i) end
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return {1, fence}
