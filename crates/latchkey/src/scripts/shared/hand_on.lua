-- latchkey: a fair lock's hand-on, shared by the scripts that end a fair
-- hold (fair_release.lua, fair_leave.lua, fair_revoke.lua; prepended after
-- shared/fence.lua and shared/live.lua), so that a release, a waiter leaving and a revocation
-- hand the lock to the next waiter the same way. See docs/protocol.md,
-- "Fair locks".
--
-- The scripts it joins share their KEYS:
-- KEYS[1]  lock key
-- KEYS[2]  queue               (list of waiter entries, arrival order)
-- KEYS[3]  leases              (sorted set: entry -> lease deadline, server ms)
-- KEYS[4]  fencing counter key
-- KEYS[5]  acquired record (string '<server ms>:<owner token>', PX 24 h):
--          written at a hand-off, so inspection counts the new holder's hold
--          from then, not from when it queued (its token's time); deleted
--          when the lock is freed
-- KEYS[6]  process records     (sorted set: 16 hex digits -> deadline;
--          shared/live.lua says when an entry is live)
--
-- An entry is <32 hex id>:<hand-off ttl ms>:<0|1 fenced>:<owner token>.
-- The hand-off sets the lock to the entry's token (marked '+w' when the
-- ending holder's was: the mark stays until the lock is freed) with PX
-- <hand-off ttl> (the waiter extends it to its TTL on arrival: a waiter that
-- died in between frees the lock within that bound), issues a fencing token
-- when the entry says 1 (-1 in the message when the counter holds no token:
-- the hold then has none, as when issuing fails later), and publishes
-- '<id>:<fence>' (fence 0 when not fenced) on the hand-off channel,
-- stem .. id[1..16].
--
-- hand_on(publish, stem, marked, t) -> 2 handed to the first live waiter,
--                                      1 freed (nobody live waited)
--   publish  the publish command: 'PUBLISH' or 'SPUBLISH' (anything else: PUBLISH)
--   stem     the hand-off channel stem, S:handoff:
--   marked   whether the ending holder's token was marked '+w'
--   t        the script's TIME reply
-- forget(entry) -> true when the entry was queued: takes a waiter's entry
--   out without scanning the queue (an LREM would read every entry: a herd
--   of waiters giving up together would cost the square of the queue). Its
--   lease goes; the entry itself is taken off when it is at an end of the
--   queue (at the tail with the entries before it that have no lease
--   either), and otherwise stays, dead, until it reaches the head, where
--   every attempt and hand-on drops dead entries (as it drops a crashed
--   waiter's).
-- release_as(token, publish, stem, channel) -> 2, 1 (as hand_on), 0 the key
--   is gone (the lock expired), -1 someone else holds it: the holder's
--   release; a freed lock whose token was marked publishes 'released' on
--   channel (the lock's release channel).
local function hand_on(publish, stem, marked, t)
  local now = ms_of(t)
  while true do
    local entry = redis.call('LPOP', KEYS[2])
    if not entry then break end
    local live = live_until(KEYS[3], KEYS[6], entry)
    if live then
      redis.call('ZREM', KEYS[3], entry)
      forget_records(KEYS[3], KEYS[6])
    end
    local id, px, fenced, token = string.match(entry, '^(%x+):(%d+):([01]):(.+)$')
    -- A dead entry (its lease or its process's record run out) or one that
    -- is not ours to read: skip it.
    if live and live >= now and id and #id == 32 and tonumber(px) > 0 then
      -- A marked holder keeps its mark across the hand-off: whoever marked it
      -- (a plain waiter, which is not in the queue) is then woken when the
      -- lock is finally freed, not at the TTL it read.
      local value = token
      if marked then value = token .. '+w' end
      redis.call('SET', KEYS[1], value, 'PX', px)
      redis.call('SET', KEYS[5], string.format('%d', now) .. ':' .. token, 'PX', 86400000)
      local issued = 0
      if fenced == '1' then issued = fence_issue(KEYS[4], t) or -1 end
      publish_on(publish, stem .. string.sub(id, 1, 16), id .. ':' .. string.format('%.0f', issued))
      return 2
    end
  end
  -- Freed: no holder for the record to name (a plain release leaves it to
  -- its TTL; it then names a token nobody holds, which inspection ignores).
  redis.call('DEL', KEYS[1], KEYS[5])
  return 1
end

-- The entry at the head or the tail is taken off with an LREM counted
-- from that end, which stops at the edge itself: O(1), and no command
-- beyond the ACL rules that earlier versions documented (as RPOP would
-- be). At the tail, the dead entries before it go too (at the head, the
-- next attempt or hand-on drops them).
local function forget(entry)
  if redis.call('ZREM', KEYS[3], entry) == 0 then return false end
  forget_records(KEYS[3], KEYS[6])
  if redis.call('LINDEX', KEYS[2], 0) == entry then
    redis.call('LREM', KEYS[2], 1, entry)
  elseif redis.call('LINDEX', KEYS[2], -1) == entry then
    redis.call('LREM', KEYS[2], -1, entry)
    while true do
      local edge = redis.call('LINDEX', KEYS[2], -1)
      if not edge or redis.call('ZSCORE', KEYS[3], edge) then break end
      redis.call('LREM', KEYS[2], -1, edge)
    end
  end
  return true
end

local function release_as(token, publish, stem, channel)
  local holder = redis.call('GET', KEYS[1])
  if not ours(holder, token) then
    if holder then return -1 end
    return 0
  end
  local marked = holder ~= token
  local outcome = hand_on(publish, stem, marked, redis.call('TIME'))
  if outcome == 1 and marked then
    publish_on(publish, channel, 'released')
  end
  return outcome
end
