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
