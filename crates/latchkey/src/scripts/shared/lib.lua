-- latchkey: the idioms every script shares, prepended to each (before
-- shared/fence.lua and shared/mark.lua where those are prepended too),
-- written once so that their copies cannot drift apart.

-- A `TIME` reply ({seconds, microseconds}) in milliseconds.
local function ms_of(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The server's clock in milliseconds.
local function now_ms()
  return ms_of(redis.call('TIME'))
end

-- Publishes `message` on `channel` with the publish command the client
-- sent: 'SPUBLISH' on a Redis Cluster (sharded pub/sub), anything else
-- 'PUBLISH'. pcall: a wake-up is a hint; a refusal (ACL) must not fail the
-- script after its writes.
local function publish_on(command, channel, message)
  if command == 'SPUBLISH' then return redis.pcall('SPUBLISH', channel, message) end
  return redis.pcall('PUBLISH', channel, message)
end

-- Whether a lock key's value `holder` is the owner token `token`, marked
-- by a waiter ('+w': its release publishes) or not.
local function ours(holder, token)
  return holder == token or holder == token .. '+w'
end
