-- latchkey: take several locks at once, all or none (Client::lock_all, on one
-- server, or on a Redis Cluster when every name is in one slot), with the
-- same owner token in every lock key: each key looks exactly like an
-- ordinary lock's; and, if asked, issue each lock's fencing token.
--
-- KEYS     pairs, one per lock, in the caller's order (sorted by key):
--   KEYS[2i-1]  lock key            (plain string holding the owner's token)
--   KEYS[2i]    fencing counter key (plain string: the last token issued)
--   then, optionally, KEYS[2n+i]: lock i's waiting processes (n locks):
--          a waiter that marks lock i registers there as '*' (it listens
--          on the release channels only: shared/mark.lua), so that the
--          release of lock i wakes everyone when its turn comes
-- ARGV[1]  owner token         (opaque unique string, >= 128 random bits)
-- ARGV[2]  TTL in milliseconds (integer > 0)
-- ARGV[3]  '1': issue every lock's fencing token; '0': touch no counter
-- ARGV[4]  '1': the caller waits: mark the first busy holder's token with
--          '+w' so that its release publishes, and tell a holder that keeps
--          its lock while idle that it is wanted (shared/mark.lua, as
--          acquire.lua does); '0': do not
-- ARGV[5]  the publish command ('PUBLISH', or 'SPUBLISH' on a Redis Cluster)
-- ARGV[5+i] lock i's release channel (in KEYS order), where its holder kept
--          idle is told 'wanted'
--
-- Returns
--   {1, fence_1, ..., fence_n}  all taken (each key SET to ARGV[1] with PX
--                       ARGV[2]); fence_i as acquire.lua issues it, or 0
--                       each when ARGV[3] = '0'
--   {0, i, pttl, announced}  none taken: lock i (in KEYS order) is held;
--                       pttl its remaining TTL in ms (-1: no TTL); announced
--                       as shared/mark.lua's (1: its release will publish;
--                       2: not waiting, a holder kept idle)
-- Errors
--   WRONGTYPE           a lock key exists but is not a string (nothing taken).
--   BADFENCE latchkey: … (issuing) a counter does not hold a token (nothing
--                       taken, nothing changed).
local n = #ARGV - 5
local sets = #KEYS == 3 * n
for i = 1, n do
  local key = KEYS[2 * i - 1]
  local holder = redis.pcall('GET', key)
  if type(holder) == 'table' and holder.err then
    return redis.error_reply('WRONGTYPE lock key ' .. key .. ' holds a value that is not a string')
  end
  if holder then
    -- Busy: nothing was written but the mark (shared/mark.lua), which
    -- also tells a holder kept idle that it is wanted.
    local announced = mark_busy(key, holder, ARGV[4], ARGV[5 + i], ARGV[5])
    local pttl = redis.call('PTTL', key)
    if announced == 1 and ARGV[4] == '1' and sets then
      register_waiting(KEYS[2 * n + i], '*', pttl, ARGV[2])
    end
    return {0, i, pttl, announced}
  end
end
local fences = {}
if ARGV[3] == '1' then
  -- Every counter checked before anything is written: all or nothing.
  for i = 1, n do
    if not fence_read(KEYS[2 * i]) then return fence_bad(KEYS[2 * i]) end
  end
  local now = redis.call('TIME')
  for i = 1, n do
    -- Read again: two names may share a counter (an empty prefix makes `x`
    -- and `{x}` share a stem), and each token must outrank the last.
    local fence = fence_next(fence_read(KEYS[2 * i]), now)
    fence_store(KEYS[2 * i], fence)
    fences[i] = fence
  end
end
local reply = {1}
for i = 1, n do
  redis.call('SET', KEYS[2 * i - 1], ARGV[1], 'PX', ARGV[2])
  reply[i + 1] = fences[i] or 0
end
return reply
