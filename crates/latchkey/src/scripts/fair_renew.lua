-- latchkey: renews the queue leases of many waiters of one fair lock at
-- once: one script per process per lock every third of the lease, instead
-- of one per waiter (see docs/protocol.md, "Fair locks"). It only renews:
-- an entry that is no longer queued (handed the lock, or dropped as dead)
-- is not queued again, and is named in the reply so that its waiter looks
-- for itself (`fair_acquire.lua` in mode 'renew').
--
-- KEYS[1]  lock key            (string: the owner's token, maybe marked '+w')
-- KEYS[2]  queue               (list of waiter entries, arrival order)
-- KEYS[3]  leases              (sorted set: entry -> lease deadline, server ms)
-- ARGV[1]  lease in milliseconds (each entry's deadline is server time + this)
-- ARGV[2..] the entries to renew
--
-- Also, as every waiter's `fair_acquire.lua` does: marks an unmarked 'lk2:'
-- holder with '+w' (so that a plain release publishes the wake-up), and,
-- when the lock is free, drops dead entries from the head of the queue.
--
-- Returns {wait_ms, head, gone...}
--   wait_ms  the holder's PTTL (-1: no TTL); when the lock is free, the ms
--            until the live head's lease runs out (-2: nobody live queued)
--   head     when the lock is free: the live head's entry (if it is one
--            of ARGV, its waiter takes the lock now); else ''
--   gone     the positions (1-based, among the entries) of the entries
--            that are no longer queued
-- Errors
--   WRONGTYPE  the lock key or leases hold the wrong type.
local t = redis.call('TIME')
local now = ms_of(t)
local lease = tonumber(ARGV[1])
local deadline = string.format('%.0f', now + lease)
local n = #ARGV - 1

-- Renew every entry still queued (XX: never re-add one), in batches that
-- stay below Lua's limit on unpacked values. CH counts the renewed ones:
-- all of them, unless some are gone (or renewed twice in one ms).
local renewed = 0
local i = 2
while i <= #ARGV do
  local batch = {}
  while i <= #ARGV and #batch < 2000 do
    batch[#batch + 1] = deadline
    batch[#batch + 1] = ARGV[i]
    i = i + 1
  end
  renewed = renewed + redis.call('ZADD', KEYS[3], 'XX', 'CH', unpack(batch))
end
local reply = {-2, ''}
if renewed < n then
  for j = 2, #ARGV do
    if not redis.call('ZSCORE', KEYS[3], ARGV[j]) then reply[#reply + 1] = j - 1 end
  end
end
if renewed > 0 then
  -- The queue lives as long as its longest lease: no key outlives its waiters.
  for k = 2, 3 do
    if redis.call('PTTL', KEYS[k]) < lease then redis.call('PEXPIRE', KEYS[k], lease) end
  end
end

local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' and holder.err then
  return redis.error_reply('WRONGTYPE lock key holds a value that is not a string')
end
if holder then
  -- A holder that releases with the plain script then publishes the wake-up.
  if string.sub(holder, 1, 4) == 'lk2:' and string.sub(holder, -2) ~= '+w' then
    redis.pcall('APPEND', KEYS[1], '+w')
  end
  reply[1] = redis.call('PTTL', KEYS[1])
  return reply
end

-- Free: drop dead heads (lease gone or run out); the first live entry is
-- the head, whose waiter takes the lock.
while true do
  local head = redis.call('LINDEX', KEYS[2], 0)
  if not head then break end
  local until_ms = redis.call('ZSCORE', KEYS[3], head)
  if until_ms and tonumber(until_ms) >= now then
    reply[1] = tonumber(until_ms) - now
    reply[2] = head
    break
  end
  redis.call('LPOP', KEYS[2])
  if until_ms then redis.call('ZREM', KEYS[3], head) end
end
return reply
