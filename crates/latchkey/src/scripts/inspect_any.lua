-- latchkey: read every primitive's state under one name atomically, for
-- inspection (`Client::describe`, and `Client::inspect`, its lock view;
-- `latchkey status`, `list`, `top`, the exporter). Read-only:
-- changes nothing. A key of another type than its layout's reads as absent
-- (a snapshot for people, never an error that hides the other kinds), but
-- for the lock key (below). A kind's own commands run only on a key of its
-- type (TYPE first), so a name holding only a plain lock is read with the
-- locks' commands alone (TYPE, GET, PTTL, TIME): `Client::inspect` needs no
-- more of the ACL rule than the locks' (docs/security.md).
--
-- KEYS[1]   lock key                        P + name
-- KEYS[2]   lock fencing counter            S:fence
-- KEYS[3]   fair lock queue (list)          S:queue
-- KEYS[4]   fair lock leases (zset)         S:leases
-- KEYS[5]   semaphore permits (zset)        S:permits
-- KEYS[6]   semaphore fencing counter       S:permits:fence
-- KEYS[7]   rwlock writer (string)          S:rw:writer
-- KEYS[8]   rwlock readers (zset)           S:rw:readers
-- KEYS[9]   rwlock writers waiting (zset)   S:rw:writers-waiting
-- KEYS[10]  rwlock readers waiting (zset)   S:rw:readers-waiting
-- KEYS[11]  rwlock readers next (set)       S:rw:readers-next
-- KEYS[12]  rwlock fencing counter          S:rw:fence
-- KEYS[13]  latch (string)                  S:latch
-- KEYS[14]  barrier (hash)                  S:barrier
-- KEYS[15]  election lease (string)         S:leader
-- KEYS[16]  election state (hash)           S:election
-- KEYS[17]  lock acquired record (string)    S:acquired
-- KEYS[18]  rwlock writer acquired record     S:rw:writer-acquired
-- KEYS[19]  fair lock process records (zset) S:alive
-- ARGV[1]   the most members listed per sorted set or list (the rest is cut)
--
-- Returns {now_ms, lock, fair, permits, rw, latch, barrier, election}
--   now_ms    server time (TIME), ms, as a decimal string
--   lock      {value, pttl, fence, held_ms}     value: the lock key's (the
--             holder's owner token); pttl: its TTL in ms (-2 no key, -1 no
--             TTL); fence: the counter (the last token issued); held_ms: how
--             long the holder has held it by the server's clock, when the
--             acquired record names its token (a waiter that was queued)
--   fair      {entries, leases}                 LRANGE of the queue (arrival
--             order); live entries: flat {entry, live_until_ms, …}, an entry
--             live while its own lease runs and its process's record, if
--             any, has not run out (shared/live.lua), until the sooner
--   permits   {members, fence}                  unexpired: flat {token, expiry_ms, …}
--   rw        {writer, writer_pttl, readers, writers_waiting, readers_waiting,
--              readers_next_count, fence, writer_held_ms}  zsets unexpired, flat
--             as above; writer_held_ms as the lock's held_ms
--   latch     {value, pttl}
--   barrier   {exists, parties, gen, arrived, pttl}
--   election  {lease, lease_pttl, exists, token, value, term, since, change, last_term}
-- A missing key or field is false (a nil reply).
-- Errors
--   WRONGTYPE  the lock key (P + name, which no other kind uses) exists but is
--              not a string: NAME is not a primitive's name.
local limit = tonumber(ARGV[1]) or 1000
local now = string.format('%d', now_ms())

local function kind(k) return redis.call('TYPE', k).ok end
local function str(k)
  if kind(k) == 'string' then return redis.call('GET', k) end
  return false
end
local function live(k)
  if kind(k) ~= 'zset' then return {} end
  return redis.call('ZRANGEBYSCORE', k, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, limit)
end
local function fields(k, ...)
  if kind(k) ~= 'hash' then return false end
  return redis.call('HMGET', k, ...)
end

local lock_type = kind(KEYS[1])
if lock_type ~= 'string' and lock_type ~= 'none' then
  return redis.error_reply('WRONGTYPE lock key holds a value that is not a string')
end
-- How long the holder `value` has held, when the acquired record `k` names
-- its token (written when a waiter that queued got the hold); else false.
local function held_ms(value, k)
  local record = value and str(k)
  if not record then return false end
  local at, token = string.match(record, '^(%d+):(.+)$')
  if not at or (value ~= token and value ~= token .. '+w') then return false end
  return math.max(tonumber(now) - tonumber(at), 0)
end

local lock_value = str(KEYS[1])
local lock = {lock_value, redis.call('PTTL', KEYS[1]), str(KEYS[2]), held_ms(lock_value, KEYS[17])}

local entries = {}
if kind(KEYS[3]) == 'list' then entries = redis.call('LRANGE', KEYS[3], 0, limit - 1) end
local leases = live(KEYS[4])
if #leases > 0 and kind(KEYS[19]) == 'zset' then
  local kept = {}
  for i = 1, #leases, 2 do
    local rec = redis.call('ZSCORE', KEYS[19], string.sub(leases[i], 1, 16))
    if not rec then
      kept[#kept + 1] = leases[i]
      kept[#kept + 1] = leases[i + 1]
    elseif tonumber(rec) > tonumber(now) then
      kept[#kept + 1] = leases[i]
      kept[#kept + 1] = string.format('%.0f', math.min(tonumber(rec), tonumber(leases[i + 1])))
    end
  end
  leases = kept
end
local fair = {entries, leases}

local permits = {live(KEYS[5]), str(KEYS[6])}

local next_count = 0
if kind(KEYS[11]) == 'set' then next_count = redis.call('SCARD', KEYS[11]) end
local writer = str(KEYS[7])
local rw = {writer, redis.call('PTTL', KEYS[7]), live(KEYS[8]), live(KEYS[9]),
  live(KEYS[10]), next_count, str(KEYS[12]), held_ms(writer, KEYS[18])}

local latch = {str(KEYS[13]), redis.call('PTTL', KEYS[13])}

local b = fields(KEYS[14], 'parties', 'gen', 'arrived')
local barrier = {0, false, false, false, redis.call('PTTL', KEYS[14])}
if b then barrier = {1, b[1], b[2], b[3], redis.call('PTTL', KEYS[14])} end

local e = fields(KEYS[16], 'token', 'value', 'term', 'since', 'change', 'last_term')
local election = {str(KEYS[15]), redis.call('PTTL', KEYS[15]), 0, false, false, false, false, false, false}
if e then
  election = {election[1], election[2], 1, e[1], e[2], e[3], e[4], e[5], e[6]}
end

return {now, lock, fair, permits, rw, latch, barrier, election}
