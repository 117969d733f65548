-- latchkey: one acquire attempt in a script: take the lock and, if asked,
-- issue its fencing token, atomically; or say how long the holder has left.
-- Used by locks made `with_fencing`, by waiters (whose busy attempts need
-- the holder's TTL in the same round trip) and by a client's first lock; a
-- later first try of a plain lock is a bare `SET key token NX PX ttl GET`
-- instead (see docs/protocol.md). The mark of a busy holder is
-- shared/mark.lua's, prepended.
--
-- KEYS[1]  lock key            (plain string holding the owner's token)
-- KEYS[2]  fencing counter key (plain string holding the last token issued, an integer)
-- KEYS[3]  the lock's waiting processes (a sorted set; only with ARGV[8]:
--          see shared/mark.lua)
-- ARGV[1]  owner token         (opaque unique string, >= 128 random bits)
-- ARGV[2]  TTL in milliseconds (integer > 0)
-- ARGV[3]  '0': do not issue a fencing token (KEYS[2] untouched); '1': issue it
-- ARGV[4]  '1': the caller waits for the lock: when busy, append '+w' to the
--          holder's token (a version 2 token, 'lk2:…', not yet marked) so
--          that its release publishes the wake-up; '0': do not
-- ARGV[5..7] sent only by a waiter (ARGV[4] = '1') or an asking caller, so
--          that a first try sends four arguments:
-- ARGV[5]  '1': the caller asks the holder to let go (a waiter made
--          `with_asking`): a busy reply names the holder (below); '0': not
-- ARGV[6]  with ARGV[4] = '1': the lock's release channel, and
-- ARGV[7]  the publish command ('PUBLISH', or 'SPUBLISH' on a Redis Cluster):
--          a holder that keeps the lock while idle (its token ends in ':c')
--          is told 'wanted' there when this marks its token, and lets go
--          (see docs/protocol.md, "Held while idle")
-- ARGV[8]  optional, with KEYS[3] and ARGV[4] = '1' (latchkey 0.4's
--          waiters): the 16 hex digits naming the caller's subscriber
--          connection, which listens on the lock's wake channel for it, or
--          '*' (a waiter that listens on the release channel only). Busy
--          with the holder marked: registered as waiting
--          (register_waiting); a process that acquired is taken off (its
--          other waiters now wait behind its own holder, woken locally),
--          and its token marked at once while other processes are still
--          registered (they sleep until woken: nobody else would mark it).
--
-- Returns
--   {1, fencing_token}  acquired; unless ARGV[3] = '0', fencing_token =
--                       max(counter + 1, server time in µs), stored back in
--                       KEYS[2] (no TTL) so it never goes backwards, even
--                       when the counter was lost in a restart without
--                       persistence (see docs/fencing.md); otherwise 0.
--   {0, pttl, announced} busy; pttl is the holder's remaining TTL in ms
--                       (-1: the key has no TTL, e.g. set by a foreign client).
--                       The holder's token may now end in '+w' (ARGV[4]); the
--                       key keeps its TTL. announced = 1 when the holder's
--                       release will publish the wake-up (a marked 'lk2:'
--                       token), 0 otherwise (a foreign holder, or a mark
--                       APPEND was not allowed to set): a waiter then polls.
--                       2 (only when ARGV[4] is not '1'): the holder keeps the
--                       lock while idle (an unmarked 'lk2:' token ending in
--                       ':c'): a waiter marks it at once, which tells it.
--                       (As a first try's `SET … GET` shows a plain lock.)
--   {0, pttl, announced, holder}  busy, with ARGV[5] = '1': holder, the first
--                       13 hex digits of the SHA-1 of the holder's token
--                       without its '+w' mark, as an integer (below 2^52):
--                       the same for one hold, another for the next, so that
--                       an asking waiter asks each holder once.
-- Errors
--   WRONGTYPE           the lock key exists but is not a string.
--   BADFENCE latchkey: … (issuing) the fencing counter holds something
--                       other than a token, or is not a string (nothing is changed; the lock is
--                       not taken).
-- Tokens are exact in Lua's doubles only below 2^53; latchkey's are server
-- microseconds (about 2^51 in 2026). A counter that is not such an integer
-- was written by something else: refuse rather than issue a wrong token.
local function busy()
  local holder = redis.pcall('GET', KEYS[1])
  if type(holder) == 'table' and holder.err then
    return redis.error_reply('WRONGTYPE lock key holds a value that is not a string')
  end
  local announced = mark_busy(KEYS[1], holder, ARGV[4], ARGV[6], ARGV[7])
  local pttl = redis.call('PTTL', KEYS[1])
  if announced == 1 and ARGV[4] == '1' and KEYS[3] and ARGV[8] then
    register_waiting(KEYS[3], ARGV[8], pttl, ARGV[2])
  end
  if ARGV[5] == '1' and holder then
    local bare = holder
    if string.sub(bare, 1, 4) == 'lk2:' and string.sub(bare, -2) == '+w' then
      bare = string.sub(bare, 1, -3)
    end
    return {0, pttl, announced, tonumber(string.sub(redis.sha1hex(bare), 1, 13), 16)}
  end
  return {0, pttl, announced}
end
-- Taken by a registered waiting process: it waits no more for a wake-up.
-- The others still registered sleep until a release wakes them, and only
-- a marked token's release does: mark the new hold as their attempts
-- would have (and tell it, if it keeps the lock while idle).
local function taken()
  if not (KEYS[3] and ARGV[8]) or ARGV[8] == '*' then return end
  redis.pcall('ZREM', KEYS[3], ARGV[8])
  local others = redis.pcall('ZCARD', KEYS[3])
  if type(others) == 'number' and others > 0 then
    mark_busy(KEYS[1], ARGV[1], '1', ARGV[6], ARGV[7])
  end
end
local fenced = ARGV[3] ~= '0'
if not fenced then
  if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    taken()
    return {1, 0}
  end
  return busy()
end
local last = fence_read(KEYS[2])
if not last then return fence_bad(KEYS[2]) end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  taken()
  local fence = fence_next(last, redis.call('TIME'))
  fence_store(KEYS[2], fence)
  return {1, fence}
end
return busy()
