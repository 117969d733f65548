-- latchkey torture suite: the recording resource. A counter that workers
-- read, then overwrite with the value read plus one, guarded by fencing
-- tokens, and a log of every access in the order the server executed them.
--
-- KEYS[1]  state: a hash with `value` (the counter, default 0) and `fence`
--          (the highest fencing token that has touched the resource)
-- KEYS[2]  log: a list; every call appends one entry (RPUSH)
-- ARGV[1]  "read" or "write"
-- ARGV[2]  the caller's fencing token: decimal u64, no leading zeros
-- ARGV[3]  the caller's worker id (decimal), for the log
-- ARGV[4]  write: the new value (decimal); read: ignored
-- ARGV[5]  "fenced": refuse a token below `fence`, on reads and writes (the
--          rule of latchkey's fenced_write.lua; see below why reads too);
--          "plain": accept everything, only record whether it was stale
--
-- Returns
--   {1, value}  accepted; value is the counter after the call
--   {0, fence}  refused (fenced only): a higher token came first
-- Log entry (space separated)
--   <op> <token> <worker> <value> <accepted 1|0> <stale 1|0> <server time µs>
--   value: for a read, the value returned; for a write, the value written.
--
-- Why reads are fenced too: a fenced *write* alone cannot protect a
-- read-modify-write. Holder A (token 10) reads 5 and stalls; B (token 11)
-- reads 5; A wakes and writes 6, accepted because the resource has seen no
-- token above 10 yet; B writes 6: one increment is lost. Recording the
-- reader's token on the read closes that: A's write is then refused.
--
-- Tokens are compared as decimal strings (longer is larger, then
-- lexicographic), as in fenced_write.lua: Lua numbers are doubles.
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local op, token, worker, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
local fence = redis.call('HGET', KEYS[1], 'fence')
local value = redis.call('HGET', KEYS[1], 'value') or '0'
local stale = fence and greater(fence, token)
local now = redis.call('TIME')
local now_us = now[1] .. string.format('%06d', tonumber(now[2]))
local function log(written, accepted)
  redis.call('RPUSH', KEYS[2], table.concat({op, token, worker, written,
    accepted and '1' or '0', stale and '1' or '0', now_us}, ' '))
end
if stale and mode == 'fenced' then
  log(op == 'write' and ARGV[4] or value, false)
  return {0, fence}
end
if not stale then
  redis.call('HSET', KEYS[1], 'fence', token)
end
if op == 'write' then
  value = ARGV[4]
  redis.call('HSET', KEYS[1], 'value', value)
end
log(value, true)
return {1, value}
