-- latchkey: issue the fencing token of a held permit (one not issued at
-- acquisition), only while the caller holds the permit.
--
-- KEYS[1]  permits key (see sem_acquire.lua)
-- KEYS[2]  fencing counter (see sem_acquire.lua)
-- ARGV[1]  owner token
--
-- Returns
--   {1, fencing_token}  the permit is held; fencing_token = max(counter + 1,
--                       server time in µs), stored in KEYS[2], as at
--                       acquisition
--   {0, 0}              not issued: the permit expired or was never held
-- Errors
--   WRONGTYPE             the permits key is not a sorted set.
--   BADFENCE latchkey: …  the counter does not hold a token (nothing changed).
-- Why "only while held": as for locks (issue_fence.lua), a token issued
-- during our hold is smaller than any issued during a later hold.
local t = redis.call('TIME')
local now = ms_of(t)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) <= now then return {0, 0} end
local fence, bad = fence_issue(KEYS[2], t)
if bad then return bad end
return {1, fence}
