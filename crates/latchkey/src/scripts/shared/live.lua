-- latchkey: a fair waiter's liveness, shared by the scripts that read a
-- fair lock's queue (fair_acquire.lua, fair_renew.lua and the hand-on of
-- shared/hand_on.lua; prepended after shared/fence.lua). See
-- docs/protocol.md, "Fair locks".
--
-- An entry has two leases: its own (a score in the leases sorted set,
-- long: renewed rarely) and its process's record (a score in the alive
-- sorted set under the entry's first 16 hex digits, the subscriber id all
-- the process's entries share: renewed every third of the waiter lease,
-- one command for all of them). An entry is live while its own lease runs
-- and its process's record, if it has one, has not run out: a process that
-- dies takes all its entries with it within one waiter lease, while the
-- renewals that keep them cost one command per process, not one per
-- entry. An entry without a record (queued by a client that keeps none) is
-- judged by its own lease alone.
--
-- live_until(leases, alive, entry) -> the server ms the entry is live
--   until (its own deadline, or its record's when that is sooner), or nil
--   when it has no lease (gone, or taken out by a waiter that left).
-- record(alive, id, deadline, entry_lease) -> the record's deadline before
--   (nil: none); raises the record of process `id` to `deadline`, never
--   lowers it (a process's waiters with a longer lease share it), and the
--   records' horizon to `entry_lease` (ms), the entry lease written beside
--   it: the member 'horizon' (no process id: those are 16 hex digits),
--   whose score is minus the longest entry lease written since the key was
--   made, below every deadline. A record more than the horizon past judges
--   no entry that still has a lease of its own: every entry's own deadline
--   is at most its write plus its entry lease, and its write raised its
--   record at least to then.
-- forget_dead_records(alive, now): drops the records more than the horizon
--   past (their processes died, or stopped waiting without emptying the
--   queue).
-- forget_records(leases, alive): deletes the records once no entry has a
--   lease (an entry without one is dead whatever its record says), so that
--   a drained queue leaves no key behind; called by every script that takes
--   leases away.
local function live_until(leases, alive, entry)
  local own = redis.call('ZSCORE', leases, entry)
  if not own then return nil end
  own = tonumber(own)
  local rec = redis.call('ZSCORE', alive, string.sub(entry, 1, 16))
  if rec and tonumber(rec) < own then return tonumber(rec) end
  return own
end

local function record(alive, id, deadline, entry_lease)
  local before = redis.call('ZSCORE', alive, id)
  if not before or tonumber(before) < deadline then
    redis.call('ZADD', alive, string.format('%.0f', deadline), id)
  end
  local horizon = redis.call('ZSCORE', alive, 'horizon')
  if not horizon or -tonumber(horizon) < entry_lease then
    redis.call('ZADD', alive, string.format('%.0f', -entry_lease), 'horizon')
  end
  return before and tonumber(before)
end

local function forget_dead_records(alive, now)
  local horizon = redis.call('ZSCORE', alive, 'horizon')
  if horizon then
    redis.call('ZREMRANGEBYSCORE', alive, 0, '(' .. string.format('%.0f', now + tonumber(horizon)))
  end
end

local function forget_records(leases, alive)
  if redis.call('EXISTS', leases) == 0 then redis.call('DEL', alive) end
end
