-- latchkey: a fair lock's release: if the caller owns the lock, hand it to
-- the first live waiter in this same script (the key then holds that
-- waiter's token, and the waiter is told on its hand-off channel), or free
-- it when nobody live waits. Also how a waiter leaves the queue (ARGV[5]),
-- releasing (handing on) a lock that was handed to it in that instant.
-- See docs/protocol.md, "Fair locks".
--
-- KEYS[1]  lock key
-- KEYS[2]  queue               (list of waiter entries, arrival order)
-- KEYS[3]  leases              (sorted set: entry -> lease deadline, server ms)
-- KEYS[4]  fencing counter key
-- KEYS[5]  acquired record (string '<server ms>:<owner token>', PX 24 h):
--          written at a hand-off, so inspection counts the new holder's hold
--          from then, not from when it queued (its token's time); deleted
--          when the lock is freed
-- ARGV[1]  owner token
-- ARGV[2]  publish command: 'PUBLISH' or 'SPUBLISH' (anything else: PUBLISH)
-- ARGV[3]  hand-off channel stem, S:handoff: (+ the entry's first 16 hex digits)
-- ARGV[4]  release channel (published 'released' when the lock is freed and
--          the token was marked '+w')
-- ARGV[5]  '' or an entry to take out of the queue first (a waiter leaving)
-- ARGV[6]  optional: 'revoke': an operator's revocation (Client::revoke),
--          whoever holds the lock. ARGV[1] and ARGV[5] are ignored ('').
--          The fencing counter is raised first to fence = max(counter + 1,
--          server time in µs), then the lock is handed on as at a release,
--          so a fenced hand-off issues its token above the fence and an
--          unfenced holder's later token is issued above it too; 'revoked'
--          is published on ARGV[4]: the revoked holder checks its hold at
--          once, plain waiters take it as a wake-up.
--
-- An entry is <32 hex id>:<hand-off ttl ms>:<0|1 fenced>:<owner token>.
-- The hand-off sets the lock to the entry's token (marked '+w' when the
-- caller's was: the mark stays until the lock is freed) with PX <hand-off ttl>
-- (the waiter extends it to its TTL on arrival: a waiter that died in
-- between frees the lock within that bound), issues a fencing token when
-- the entry says 1 (-1 in the message when the counter holds no token: the
-- hold then has none, as when issuing fails later), and publishes
-- '<id>:<fence>' (fence 0 when not fenced) on ARGV[3] .. id[1..16].
--
-- Returns (a release, a waiter leaving)
--    2  handed to the next live waiter
--    1  released: nobody live waited (and, if marked, 'released' published)
--    0  not released: the key is gone (the lock expired)
--   -1  not released: someone else holds the lock now
-- Returns (ARGV[6] = 'revoke')
--   {1, fence, outcome}  revoked: fence as above; outcome 2 handed on, 1 freed
--   {0, 0, 0}            nothing held (nothing changed)
-- Errors
--   WRONGTYPE  the lock key, queue or leases hold the wrong type.
--   FOREIGN latchkey: …   (revoking) the lock key holds a value that is no
--              latchkey owner token (another program's key): nothing changed.
--   BADFENCE latchkey: …  (revoking) the counter does not hold a token:
--              nothing changed.
local revoking = ARGV[6] == 'revoke'
if ARGV[5] ~= '' then
  if redis.call('ZREM', KEYS[3], ARGV[5]) == 1 then
    redis.call('LREM', KEYS[2], 1, ARGV[5])
  end
end
local holder = redis.call('GET', KEYS[1])
local marked
if revoking then
  if not holder then return {0, 0, 0} end
  if string.sub(holder, 1, 4) ~= 'lk2:' then
    return redis.error_reply('FOREIGN latchkey: the lock key ' .. KEYS[1] ..
      ' holds a value no latchkey client wrote; nothing was revoked')
  end
  marked = string.sub(holder, -2) == '+w'
else
  marked = holder == ARGV[1] .. '+w'
  if holder ~= ARGV[1] and not marked then
    if holder then return -1 end
    return 0
  end
end
-- Literal command names only: proxies that parse scripts refuse others.
local function publish(channel, message)
  return publish_on(ARGV[2], channel, message)
end

local t = redis.call('TIME')
local now = ms_of(t)

-- Revoking: the counter goes up before the hand-off, so the next holder's
-- token (issued below, or later on its request) is above the fence: the
-- next token, max(last + 1, now in µs), stored in the counter.
local fence = 0
if revoking then
  local bad
  fence, bad = fence_issue(KEYS[4], t)
  if not fence then return bad end
end

-- Hands the lock to the first live entry (2), or frees it (1).
local function hand_on()
  while true do
    local entry = redis.call('LPOP', KEYS[2])
    if not entry then break end
    local deadline = redis.call('ZSCORE', KEYS[3], entry)
    if deadline then redis.call('ZREM', KEYS[3], entry) end
    local id, px, fenced, token = string.match(entry, '^(%x+):(%d+):([01]):(.+)$')
    -- A dead entry (lease run out) or one that is not ours to read: skip it.
    if deadline and tonumber(deadline) >= now and id and #id == 32 and tonumber(px) > 0 then
      -- A marked holder keeps its mark across the hand-off: whoever marked it
      -- (a plain waiter, which is not in the queue) is then woken when the
      -- lock is finally freed, not at the TTL it read.
      local value = token
      if marked then value = token .. '+w' end
      redis.call('SET', KEYS[1], value, 'PX', px)
      redis.call('SET', KEYS[5], string.format('%d', now) .. ':' .. token, 'PX', 86400000)
      local issued = 0
      if fenced == '1' then issued = fence_issue(KEYS[4], t) or -1 end
      publish(ARGV[3] .. string.sub(id, 1, 16), id .. ':' .. string.format('%.0f', issued))
      return 2
    end
  end
  -- Freed: no holder for the record to name (a plain release leaves it to
  -- its TTL; it then names a token nobody holds, which inspection ignores).
  redis.call('DEL', KEYS[1], KEYS[5])
  return 1
end

local outcome = hand_on()
if revoking then
  -- 'revoked', not 'released': the revoked holder checks its hold at once.
  publish(ARGV[4], 'revoked')
  return {1, fence, outcome}
end
if outcome == 1 and marked then
  publish(ARGV[4], 'released')
end
return outcome
