-- latchkey: the waiter's mark on a busy lock, shared by acquire.lua and
-- multi_acquire.lua (prepended to both, after shared/fence.lua), so that
-- every waiter marks, and tells, a holder the same way.
--
-- mark_busy(key, holder, waiting, channel, publish) -> announced
--   key      the busy lock's key
--   holder   its value (the holder's token, a string)
--   waiting  '1': the caller waits: append '+w' to an unmarked version 2
--            token ('lk2:…') so that its release publishes the wake-up
--   channel  the lock's release channel, and
--   publish  the publish command ('PUBLISH', or 'SPUBLISH' on a Redis
--            Cluster): a holder that keeps the lock while idle (its token
--            ends in ':c') is told 'wanted' there when this marks its
--            token, and lets go (docs/protocol.md, "Held while idle");
--            channel nil: not told
-- announced
--   1  the holder's release will publish (a marked 'lk2:' token)
--   2  (only when waiting is not '1') an unmarked 'lk2:' holder kept idle:
--      a waiter marks it at once, which tells it
--   0  otherwise (a foreign holder, or a mark APPEND was not allowed to
--      set: pcall, the mark is a hint, like the wake-up itself; a user not
--      allowed APPEND still waits, polling)
local function mark_busy(key, holder, waiting, channel, publish)
  if not holder then return 0 end
  local version = string.sub(holder, 1, 4)
  if version ~= 'lk2:' then return 0 end
  local tail = string.sub(holder, -2)
  if tail == '+w' then return 1 end
  if waiting ~= '1' then
    if tail == ':c' then return 2 end
    return 0
  end
  if type(redis.pcall('APPEND', key, '+w')) ~= 'number' then return 0 end
  if tail == ':c' and channel then publish_on(publish, channel, 'wanted') end
  return 1
end

-- The waiting processes of a plain lock (layout 4): a sorted set, the 16
-- hex digits naming one process's subscriber connection → when it first
-- asked, in server milliseconds. A release of a marked token wakes the
-- first of them that still listens on its wake channel (channel stem + its
-- 16 digits), instead of every waiting process (docs/protocol.md, "Waking
-- one process"). Every write is a pcall: the set is a hint, like the mark;
-- a user Redis does not let write it is woken by the broadcast.
--
-- register_waiting(set, process, pttl, ttl)
--   set      the lock's waiting-processes key
--   process  the caller's 16 hex digits, or '*' for a waiter that listens
--            only on the release channel (a multi hold's, a Redlock's): a
--            release that comes to it there wakes everyone
--   pttl     the holder's PTTL (the caller looks again by then at the
--            latest, and registers again)
--   ttl      the caller's lock TTL in ms: the set is kept that long past
--            the holder's PTTL, so a process that died leaves nothing for
--            long
-- ZADD NX: a process keeps its place while it waits.
local function register_waiting(set, process, pttl, ttl)
  -- Refused (ACL), or the key is another program's: leave it alone.
  if type(redis.pcall('ZADD', set, 'NX', now_ms(), process)) ~= 'number' then return end
  local keep = math.max(tonumber(pttl) or 0, 0) + tonumber(ttl)
  local left = redis.pcall('PTTL', set)
  if type(left) == 'number' and left < keep then
    redis.pcall('PEXPIRE', set, keep)
  end
end

-- wake_one(set, publish) -> woken
--   Pops waiting processes in order until one hears `released` on its wake
--   channel (set .. ':' .. process: the publish reply counts its
--   listeners, and on one server also the clients subscribed to a pattern
--   that matches it, which then make a dead process look alive), at most
--   WAKE_TRIES of them. false: nobody heard it (no process waits, every one
--   popped stopped listening or died, or a refusal), or '*' came first:
--   the caller broadcasts instead.
local WAKE_TRIES = 8
local function wake_one(set, publish)
  for _ = 1, WAKE_TRIES do
    local popped = redis.pcall('ZPOPMIN', set)
    if type(popped) ~= 'table' or popped.err or not popped[1] then return false end
    if popped[1] == '*' then return false end
    local heard = publish_on(publish, set .. ':' .. popped[1], 'released')
    if type(heard) == 'number' and heard > 0 then return true end
  end
  return false
end
