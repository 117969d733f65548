-- latchkey: an operator's revocation of a lock, fair or not
-- (Client::revoke), whoever holds it. The fencing counter is raised first
-- to fence = max(counter + 1, server time in µs), then the lock is handed
-- to the first live waiter of its queue, or freed, as at a fair release, so
-- a fenced hand-off issues its token above the fence and an unfenced
-- holder's later token is issued above it too; 'revoked' is published on
-- the release channel: the revoked holder checks its hold at once, plain
-- waiters take it as a wake-up. The hand-on, the KEYS and the queue's
-- entries: shared/hand_on.lua. See docs/protocol.md, "Revocation".
--
-- KEYS[1..6]  lock key, queue, leases, fencing counter, acquired record,
--             process records
-- ARGV[1]  publish command: 'PUBLISH' or 'SPUBLISH' (anything else: PUBLISH)
-- ARGV[2]  hand-off channel stem, S:handoff: (+ the entry's first 16 hex digits)
-- ARGV[3]  release channel
--
-- Returns
--   {1, fence, outcome}  revoked: fence as above; outcome 2 handed on, 1 freed
--   {0, 0, 0}            nothing held (nothing changed)
-- Errors
--   WRONGTYPE  the lock key, queue, leases or records hold the wrong type.
--   FOREIGN latchkey: …   the lock key holds a value that is no latchkey
--              owner token (another program's key): nothing changed.
--   BADFENCE latchkey: …  the counter does not hold a token: nothing changed.
local holder = redis.call('GET', KEYS[1])
if not holder then return {0, 0, 0} end
if string.sub(holder, 1, 4) ~= 'lk2:' then
  return redis.error_reply('FOREIGN latchkey: the lock key ' .. KEYS[1] ..
    ' holds a value no latchkey client wrote; nothing was revoked')
end
local t = redis.call('TIME')
-- The counter goes up before the hand-off, so the next holder's token
-- (issued by hand_on, or later on its request) is above the fence.
local fence, bad = fence_issue(KEYS[4], t)
if not fence then return bad end
local outcome = hand_on(ARGV[1], ARGV[2], string.sub(holder, -2) == '+w', t)
-- 'revoked', not 'released': the revoked holder checks its hold at once.
publish_on(ARGV[1], ARGV[3], 'revoked')
return {1, fence, outcome}
