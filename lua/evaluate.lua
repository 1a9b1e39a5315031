-- Evaluates one request against every policy of an identity, all-or-nothing, in one call.
--
-- KEYS[i]          state key of policy i; all keys share the identity's hash tag
-- ARGV[1]          now in Unix milliseconds, or '' to use the Redis clock (TIME)
-- ARGV[2]          cost of the request, a positive integer
-- ARGV[3]          '1' to consume, '0' to only look (peek)
-- ARGV[3i+1]       algorithm of policy i
-- ARGV[3i+2]       limit of policy i
-- ARGV[3i+3]       window of policy i, in milliseconds
--
-- Returns { allowed, then per policy: allowed, remaining, reset_ms, retry_ms }, integers only,
-- so the reply reads the same over RESP2 and RESP3.

local now = tonumber(ARGV[1])
if now then
  now = now - EPOCH_MS
else
  -- One clock for every gateway: theirs drift, Redis's is shared.
  local time = redis.call('TIME')
  now = (tonumber(time[1]) * 1000 - EPOCH_MS) + math.floor(tonumber(time[2]) / 1000)
end
local cost = tonumber(ARGV[2])
local apply = ARGV[3] == '1'
local count = #KEYS

local function run(consume)
  local reply = { 1 }
  for i = 1, count do
    local at = 3 * i + 1
    local allowed, remaining, reset, retry =
      ALGORITHMS[ARGV[at]](KEYS[i], tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), cost, now, consume)
    if allowed == 0 then reply[1] = 0 end
    local out = 4 * i - 2
    reply[out], reply[out + 1], reply[out + 2], reply[out + 3] = allowed, remaining, reset, retry
  end
  return reply
end

-- One policy decides and writes in a single pass. Several first look without writing, and
-- consume from all only when all admit, so a rejection anywhere consumes nothing anywhere.
if count == 1 or not apply then return run(apply) end
local look = run(false)
if look[1] == 0 then return look end
return run(true)
