-- latchkey: the fencing counters' rules, shared. Prepended to each script
-- that issues or raises a fencing token when the scripts are loaded
-- (vocab/protocol/scripts.rs), so these are locals of that script.
--
-- A counter is a plain string holding the last token issued: an integer in
-- [0, 2^53) (a Lua number is a double: exact below 2^53). A missing counter
-- counts 0; anything else (not an integer, out of range, not a string) is a
-- bad counter, refused with BADFENCE naming it and never overwritten.
--
-- fence_read(key)         -> last, exists   (last = nil: a bad counter)
-- fence_bad(key)          -> the BADFENCE error reply naming key
-- fence_next(last, time)  -> max(last + 1, server time in µs), time a TIME reply:
--                            a token never goes backwards, even when the counter
--                            was lost in a restart without persistence
-- fence_store(key, fence) SETs the counter to fence, expiring FENCE_KEEP_MS
--                         after the instant the token names, or after now
--                         if later (see below)
-- fence_issue(key, time)  -> the next token, stored in the counter key; or
--                            nil and the BADFENCE reply on a bad counter
local function fence_read(key)
  -- pcall: a counter of the wrong type is a bad counter (BADFENCE, naming
  -- that counter), not a WRONGTYPE that would blame the lock key.
  local stored = redis.pcall('GET', key)
  if type(stored) == 'table' and stored.err then stored = '' end
  if not stored then return 0, false end
  local n = tonumber(stored)
  if not n or n < 0 or n >= 9007199254740992 or n ~= math.floor(n) then
    return nil, true
  end
  return n, true
end
local function fence_bad(key)
  return redis.error_reply('BADFENCE latchkey: the fencing counter ' .. key ..
    ' does not hold a token (an integer below 2^53); delete it to reset the lock')
end
local function fence_next(last, time)
  return math.max(last + 1, tonumber(time[1]) * 1000000 + tonumber(time[2]))
end
-- A counter expires an hour after the instant its token names, or after
-- now if that is later (a token is at least the server's time in µs when
-- issued: an hour after its last issue; later for a counter raised above
-- the clock; a raise to a small value, no instant, still keeps the hour).
-- The expiry is an instant, not a span: whichever server expires the key
-- (a replica promoted since included) has its clock past token + 1 h, so
-- the next token, at least that clock, is above every token the counter
-- held, unless the clock has since gone back by more than an hour.
-- Locking per entity thus leaves no key behind for ever.
local FENCE_KEEP_MS = 3600000
local function fence_store(key, fence)
  -- TIME again, though an issuing script read it: a counter then never
  -- expires within the hour of its write, whatever it holds (a raise, a
  -- counter written by something else), not only when it holds a token.
  local time = redis.call('TIME')
  local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  -- %.0f: integers below 2^53 print exactly this way, while the default
  -- number-to-string conversion would round to 14 digits.
  redis.call('SET', key, string.format('%.0f', fence), 'PXAT',
    string.format('%.0f', math.max(math.floor(fence / 1000), now_ms) + FENCE_KEEP_MS))
end
local function fence_issue(key, time)
  local last = fence_read(key)
  if not last then return nil, fence_bad(key) end
  local fence = fence_next(last, time)
  fence_store(key, fence)
  return fence
end
