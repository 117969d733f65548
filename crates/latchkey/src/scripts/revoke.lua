-- latchkey: revoke (an operator's action) every hold of a semaphore or a
-- read-write lock, whoever holds it, and raise the fencing counter past
-- every token issued so far. (A lock, fair or not, is revoked by
-- fair_revoke.lua, which hands it to a queue's head.)
--
-- KEYS[1..n-1]  the hold keys: a semaphore's permits or a read-write lock's
--               readers (sorted sets scored by expiry in server ms), a
--               read-write lock's writer (string: the holder's token)
-- KEYS[n]       the fencing counter of the same primitive (string; may be
--               missing)
-- ARGV[1]       'SPUBLISH' on a Redis Cluster (sharded pub/sub), else 'PUBLISH'
-- ARGV[2]       the released channel (waiters wake and try again; the
--               revoked holders check their hold at once)
--
-- Returns
--   {ended, fence}  ended: the holds ended (a string key counts 1, a sorted
--                   set its unexpired members); fence: the counter after the
--                   raise, max(counter + 1, server time in µs) (as a token
--                   is issued: see issue_fence.lua)
--   {0, 0}          nothing was held (nothing changed)
-- Errors
--   BADFENCE latchkey: …  the counter does not hold a token (nothing changed).
--   FOREIGN latchkey: …   a string hold key holds a value that is no latchkey
--                         owner token (another program's key): nothing changed.
-- Why raise: a holder's fencing token is at most the counter, so `fence`
-- outranks the revoked holders' tokens; a resource raised to it
-- (fenced_raise.lua) refuses their next write at once, before the next
-- holder writes, and the next holder's token is issued above it.
local t = redis.call('TIME')
local now = ms_of(t)
local counter = KEYS[#KEYS]
local last = fence_read(counter)
if not last then return fence_bad(counter) end
for i = 1, #KEYS - 1 do
  if redis.call('TYPE', KEYS[i])['ok'] == 'string' then
    if string.sub(redis.call('GET', KEYS[i]), 1, 4) ~= 'lk2:' then
      return redis.error_reply('FOREIGN latchkey: the key ' .. KEYS[i] ..
        ' holds a value no latchkey client wrote; nothing was revoked')
    end
  end
end
local ended = 0
for i = 1, #KEYS - 1 do
  local kind = redis.call('TYPE', KEYS[i])['ok']
  if kind == 'string' then
    ended = ended + 1
  elseif kind == 'zset' then
    ended = ended + redis.call('ZCOUNT', KEYS[i], '(' .. now, '+inf')
  end
  if kind ~= 'none' then redis.call('DEL', KEYS[i]) end
end
if ended == 0 then return {0, 0} end
local fence = fence_next(last, t)
fence_store(counter, fence)
-- 'revoked', not 'released': waiters wake on it as on any release, and a
-- holder that hears it checks its hold at once (and learns why it ended).
publish_on(ARGV[1], ARGV[2], 'revoked')
return {ended, fence}
