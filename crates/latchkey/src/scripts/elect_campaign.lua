-- latchkey: one campaign attempt of an election: become leader if nobody is.
--
-- KEYS[1]  lease key   ({P+name}:leader: a string holding the leader's owner
--                       token, with the lease's TTL; renewed by extend.lua)
-- KEYS[2]  state hash  ({P+name}:election: token, value, term, since of the
--                       current leader; last_term and change, no TTL)
-- ARGV[1]  owner token (opaque unique string, >= 128 random bits)
-- ARGV[2]  TTL in milliseconds (integer > 0)
-- ARGV[3]  the candidate's value (any bytes)
-- ARGV[4]  change channel ({P+name}:election:changes)
-- ARGV[5]  the publish command: 'PUBLISH', or 'SPUBLISH' on a Redis Cluster
--
-- Returns
--   {1, term, since_ms, change}  elected; term = max(last_term + 1, server
--                       time in µs), stored as last_term (never goes
--                       backwards, even when the hash was lost in a restart
--                       without persistence); since_ms = server time in ms;
--                       change = the change counter after this election.
--   {0, pttl}           someone leads; pttl = the lease's remaining TTL in ms
--                       (-1: the key has no TTL, e.g. set by something else).
-- Publishes (pcall: a hint; refused by an ACL, observers re-read later)
--   '<change> -'                         when the previous leader's lease ran
--                                        out without a resign (recorded now)
--   '<change> <term> <since_ms> <ttl_ms> <value>' the election itself
-- Errors
--   WRONGTYPE           a key exists with the wrong type.
--   BADFENCE latchkey: … last_term holds something other than a term.
local holder = redis.call('GET', KEYS[1])
if holder then
  return {0, redis.call('PTTL', KEYS[1])}
end
-- Literal command names only: proxies that parse scripts refuse others.
local function publish(message)
  return publish_on(ARGV[5], ARGV[4], message)
end
local state = redis.call('HMGET', KEYS[2], 'token', 'last_term', 'change')
local last = 0
if state[2] then
  last = tonumber(state[2])
  if not last or last < 0 or last >= 9007199254740992 or last ~= math.floor(last) then
    return redis.error_reply('BADFENCE latchkey: the term counter ' .. KEYS[2] ..
      ' does not hold a term (an integer below 2^53); delete it to reset the election')
  end
end
local change = tonumber(state[3]) or 0
if state[1] then
  -- The last leader's lease ran out: that was a change too.
  change = change + 1
  redis.call('HDEL', KEYS[2], 'token', 'value', 'term', 'since')
  publish(string.format('%.0f -', change))
end
local now = redis.call('TIME')
local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
local term = math.max(last + 1, now_us)
local since = math.floor(now_us / 1000)
change = change + 1
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
-- %.0f: integers below 2^53 print exactly this way.
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'value', ARGV[3],
  'term', string.format('%.0f', term), 'since', string.format('%.0f', since),
  'last_term', string.format('%.0f', term), 'change', string.format('%.0f', change))
publish(string.format('%.0f %.0f %.0f ', change, term, since) .. ARGV[2] .. ' ' .. ARGV[3])
return {1, term, since, change}
