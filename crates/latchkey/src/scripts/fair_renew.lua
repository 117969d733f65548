-- latchkey: renews one process's waiters on one fair lock at once (see
-- docs/protocol.md, "Fair locks"), every third of the waiter lease: the
-- process's record, which keeps all its entries live (shared/live.lua),
-- and the own leases of the entries given, which the process sends only
-- when they are due (a third of their long lease) or when it wants to
-- know that they are still queued. It only renews: an entry that is no
-- longer queued (handed the lock, or dropped as dead) is not queued again,
-- and is named in the reply so that its waiter looks for itself
-- (`fair_acquire.lua` in mode 'renew').
--
-- KEYS[1]  lock key            (string: the owner's token, maybe marked '+w')
-- KEYS[2]  queue               (list of waiter entries, arrival order)
-- KEYS[3]  leases              (sorted set: entry -> own lease deadline, server ms)
-- KEYS[4]  process records     (sorted set: 16 hex digits -> deadline, server
--          ms; and 'horizon' -> minus the longest entry lease, shared/live.lua)
-- ARGV[1]  the entries' own lease in milliseconds (each entry given gets the
--          deadline server time + this)
-- ARGV[2]  the process's lease in milliseconds (its record's deadline is
--          raised to server time + this)
-- ARGV[3]  the process's id: the 16 hex digits its entries start with
-- ARGV[4..] the entries to renew (none: only the record)
--
-- Also, as every waiter's `fair_acquire.lua` does: marks an unmarked 'lk2:'
-- holder with '+w' (so that a plain release publishes the wake-up), and,
-- when the lock is free, drops dead entries from the head of the queue.
-- Records more than the horizon past (the longest entry lease written
-- beside a record) are dropped: every entry they judged has run out by its
-- own lease; all of them are, when no entry has a lease left
-- (shared/live.lua).
--
-- Returns {wait_ms, head, holder, lapsed, gone...}
--   wait_ms  the holder's PTTL (-1: no TTL); when the lock is free, the ms
--            until the live head is no longer live (-2: nobody live queued)
--   head     when the lock is free: the live head's entry (if it is one
--            of this process's, its waiter takes the lock now); else ''
--   holder   the lock key's value without a '+w' mark ('' when free): a
--            hand-off to one of this process's waiters whose message was
--            lost shows as its token
--   lapsed   1 when the process's record had run out (or there was none)
--            before this renewal: other scripts may have dropped any of its
--            entries, which the process then sends all of; else 0
--   gone     the positions (1-based, among the entries) of the entries
--            that are no longer queued
-- Errors
--   WRONGTYPE  the lock key, leases or records hold the wrong type.
local t = redis.call('TIME')
local now = ms_of(t)
local lease = tonumber(ARGV[1])
local process_lease = tonumber(ARGV[2])
local first = 4
local n = #ARGV - first + 1

forget_dead_records(KEYS[4], now)
local before = record(KEYS[4], ARGV[3], now + process_lease, lease)
local lapsed = 0
if not before or before < now then lapsed = 1 end

-- Renew every entry given that is still queued (XX: never re-add one), in
-- batches that stay below Lua's limit on unpacked values. CH counts the
-- renewed ones: all of them, unless some are gone (or renewed twice in
-- one ms).
local deadline = string.format('%.0f', now + lease)
local renewed = 0
local i = first
while i <= #ARGV do
  local batch = {}
  while i <= #ARGV and #batch < 2000 do
    batch[#batch + 1] = deadline
    batch[#batch + 1] = ARGV[i]
    i = i + 1
  end
  renewed = renewed + redis.call('ZADD', KEYS[3], 'XX', 'CH', unpack(batch))
end
local reply = {-2, '', '', lapsed}
if renewed < n then
  for j = first, #ARGV do
    if not redis.call('ZSCORE', KEYS[3], ARGV[j]) then reply[#reply + 1] = j - first + 1 end
  end
end
-- The queue lives as long as its longest lease: no key outlives its
-- waiters, and no record outlives the entries it judges.
local keep = {4}
if renewed > 0 then keep = {2, 3, 4} end
for _, k in ipairs(keep) do
  if redis.call('PTTL', KEYS[k]) < lease then redis.call('PEXPIRE', KEYS[k], lease) end
end

local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' and holder.err then
  return redis.error_reply('WRONGTYPE lock key holds a value that is not a string')
end
if holder then
  reply[1] = redis.call('PTTL', KEYS[1])
  if string.sub(holder, -2) == '+w' then
    reply[3] = string.sub(holder, 1, -3)
  else
    reply[3] = holder
    -- A holder that releases with the plain script then publishes the wake-up.
    if string.sub(holder, 1, 4) == 'lk2:' then redis.pcall('APPEND', KEYS[1], '+w') end
  end
  forget_records(KEYS[3], KEYS[4])
  return reply
end

-- Free: drop dead heads; the first live entry is the head, whose waiter
-- takes the lock.
while true do
  local head = redis.call('LINDEX', KEYS[2], 0)
  if not head then break end
  local until_ms = live_until(KEYS[3], KEYS[4], head)
  if until_ms and until_ms >= now then
    reply[1] = until_ms - now
    reply[2] = head
    break
  end
  redis.call('LPOP', KEYS[2])
  if until_ms then redis.call('ZREM', KEYS[3], head) end
end
forget_records(KEYS[3], KEYS[4])
return reply
