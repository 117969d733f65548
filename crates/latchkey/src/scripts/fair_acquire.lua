-- latchkey: a fair lock's attempt, queueing and queue-lease renewal in one
-- script (see docs/protocol.md, "Fair locks"). The lock is taken only when
-- it is free and the queue has no live waiter ahead of the caller; a waiter
-- calls it again every third of its lease, which renews its place and finds
-- a hand-off whose message was lost.
--
-- KEYS[1]  lock key            (string: the owner's token, maybe marked '+w')
-- KEYS[2]  queue               (list of waiter entries, arrival order)
-- KEYS[3]  leases              (sorted set: entry -> lease deadline, server ms)
-- KEYS[4]  fencing counter key
-- KEYS[5]  acquired record (string '<server ms>:<owner token>'): written when
--          a queued caller takes the lock, so inspection counts its hold from
--          then, not from when it queued (its token's time)
-- KEYS[6]  process records     (sorted set: the entry's first 16 hex digits ->
--          the process's deadline, server ms; see shared/live.lua)
-- ARGV[1]  the caller's entry: <32 hex id>:<hand-off ttl ms>:<0|1 fenced>:<owner token>
-- ARGV[2]  owner token         (the entry's last field)
-- ARGV[3]  TTL in milliseconds of a lock taken here
-- ARGV[4]  '1': issue a fencing token when taking the lock; '0': do not
-- ARGV[5]  'wait': queue the caller (or renew its lease) when it cannot take
--          the lock, and mark an unmarked 'lk2:' holder with '+w';
--          'renew': as 'wait', but only renew: an entry no longer queued
--          (handed the lock, or dropped as dead, while the caller did not
--          listen) is not queued again (queued = 0 in the reply: the caller
--          queues again under a new entry, so that a late hand-off message
--          for the old one cannot be mistaken for a new hand-off);
--          'try': change nothing when it cannot
-- ARGV[6]  the entry's own lease in milliseconds (its deadline is server
--          time + this; long: its process's record keeps it live)
-- ARGV[7]  the process's lease in milliseconds: queueing or renewing also
--          raises the process's record to server time + this
--
-- Returns
--   {1, fence}        taken now (SET NX PX ARGV[3]); the caller left the queue.
--                     fence: the fencing token (ARGV[4] = '1') or 0.
--   {2, fence, pttl}  already the caller's: a release handed it over (its
--                     message may have been lost). fence: the counter (the
--                     token the hand-off issued) when ARGV[4] = '1', else 0;
--                     -1 when the counter holds no token. pttl: the key's TTL.
--   {0, wait_ms, queued}  not taken. wait_ms: the holder's PTTL (-1: no TTL),
--                     or, when the lock is free but a live waiter is ahead,
--                     the ms until the head is no longer live. queued: 1 when
--                     the caller is in the queue now.
-- Errors
--   WRONGTYPE         the lock key, queue, leases or records hold the wrong type.
--   BADFENCE latchkey: … (taking, fenced) the counter does not hold a token;
--                     the lock is not taken (dead entries may have been dropped).
local t = redis.call('TIME')
local now = ms_of(t)
local me, token = ARGV[1], ARGV[2]
local lease = tonumber(ARGV[6])

local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' and holder.err then
  return redis.error_reply('WRONGTYPE lock key holds a value that is not a string')
end

-- Leaves the queue; true when the caller was queued.
local function leave()
  if redis.call('ZREM', KEYS[3], me) == 1 then
    redis.call('LREM', KEYS[2], 1, me)
    return true
  end
  return false
end

-- Ours already: a release handed it over.
if ours(holder, token) then
  if leave() then forget_records(KEYS[3], KEYS[6]) end
  local fence = 0
  if ARGV[4] == '1' then fence = fence_read(KEYS[4]) or -1 end
  return {2, fence, redis.call('PTTL', KEYS[1])}
end

-- Drop dead heads (lease gone or run out, or its process's record run
-- out): the first live entry is the head.
local head, head_until
while true do
  head = redis.call('LINDEX', KEYS[2], 0)
  if not head then break end
  head_until = live_until(KEYS[3], KEYS[6], head)
  if head_until and head_until >= now then break end
  redis.call('LPOP', KEYS[2])
  if head_until then
    redis.call('ZREM', KEYS[3], head)
    forget_records(KEYS[3], KEYS[6])
  end
end

if not holder and (not head or head == me) then
  local fence = 0
  if ARGV[4] == '1' then
    local last = fence_read(KEYS[4])
    if not last then return fence_bad(KEYS[4]) end
    fence = fence_next(last, t)
  end
  redis.call('SET', KEYS[1], token, 'PX', ARGV[3])
  if fence > 0 then fence_store(KEYS[4], fence) end
  -- A caller that waited in the queue holds a token made when it queued.
  if leave() then
    redis.call('SET', KEYS[5], string.format('%d', now) .. ':' .. token, 'PX', 86400000)
  end
  forget_records(KEYS[3], KEYS[6])
  return {1, fence}
end

local queued = 0
if ARGV[5] == 'wait' or ARGV[5] == 'renew' then
  local in_queue = redis.call('ZSCORE', KEYS[3], me)
  if in_queue or ARGV[5] == 'wait' then
    if not in_queue then
      redis.call('RPUSH', KEYS[2], me)
    end
    redis.call('ZADD', KEYS[3], now + lease, me)
    record(KEYS[6], string.sub(me, 1, 16), now + tonumber(ARGV[7]), lease)
    queued = 1
    -- The queue lives as long as its longest lease: no key outlives its
    -- waiters, and no record outlives the entries it judges.
    for _, i in ipairs({2, 3, 6}) do
      if redis.call('PTTL', KEYS[i]) < lease then redis.call('PEXPIRE', KEYS[i], lease) end
    end
  end
  -- A holder that releases with the plain script (a barging client, or
  -- `latchkey release`) then publishes the wake-up: the head takes it then.
  if holder and string.sub(holder, 1, 4) == 'lk2:' and string.sub(holder, -2) ~= '+w' then
    redis.pcall('APPEND', KEYS[1], '+w')
  end
end
if holder then
  return {0, redis.call('PTTL', KEYS[1]), queued}
end
return {0, math.max((head_until or now) - now, 0), queued}
