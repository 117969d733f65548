-- latchkey: issue the fencing token of a hold, only while the caller holds it.
--
-- KEYS[1]  lock key            (plain string holding the owner's token)
-- KEYS[2]  fencing counter key (plain string holding the last token issued, an integer)
-- KEYS[3]  optional: the layout 2 counter of the same lock (read, and kept up
--          while it exists; see docs/protocol.md, "Layout versions")
-- ARGV[1]  owner token (the key may hold it marked by a waiter: token .. '+w')
--
-- Returns
--   {1, fencing_token}  we hold the lock; fencing_token = max(counter + 1,
--                       server time in µs), stored back in KEYS[2] (no TTL)
--                       so it never goes backwards (see docs/fencing.md).
--   {0, 0}              not issued: the key is gone (the lock expired)
--   {-1, 0}             not issued: someone else holds the lock now
-- Errors
--   WRONGTYPE           the lock key exists but is not a string.
--   BADFENCE latchkey: … the fencing counter holds something other than a
--                       token, or is not a string (nothing is changed).
-- Why "only while held": a token issued during our hold is smaller than any
-- token issued during a later hold, since that hold starts after ours ended
-- and its token is issued after that. A stale holder asking too late gets
-- nothing, not a token that would outrank the new holder's.
local holder = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] and holder ~= ARGV[1] .. '+w' then
  if holder then return {-1, 0} end
  return {0, 0}
end
-- The last token issued: the counter's, and the layout 2 counter's (KEYS[3],
-- present while 0.2 clients may still issue tokens for this lock), the
-- larger. pcall: a counter of the wrong type is a bad counter (BADFENCE,
-- naming that counter), not a WRONGTYPE that would blame the lock key.
local function counter(key)
  local stored = redis.pcall('GET', key)
  if type(stored) == 'table' and stored.err then stored = '' end
  if not stored then return 0, false end
  local n = tonumber(stored)
  if not n or n < 0 or n >= 9007199254740992 or n ~= math.floor(n) then
    return nil, true
  end
  return n, true
end
local last, _ = counter(KEYS[2])
local legacy_last, legacy_exists = 0, false
if KEYS[3] then legacy_last, legacy_exists = counter(KEYS[3]) end
local function bad(key)
  return redis.error_reply('BADFENCE latchkey: the fencing counter ' .. key ..
    ' does not hold a token (an integer below 2^53); delete it to reset the lock')
end
if not last then return bad(KEYS[2]) end
if not legacy_last then return bad(KEYS[3]) end
last = math.max(last, legacy_last)
local now = redis.call('TIME')
local fence = math.max(last + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
-- %.0f: integers below 2^53 print exactly this way (the default conversion
-- would round to 14 digits).
redis.call('SET', KEYS[2], string.format('%.0f', fence))
-- A 0.2 client reads only the old counter: keep it up while it exists.
if legacy_exists then redis.call('SET', KEYS[3], string.format('%.0f', fence)) end
return {1, fence}
