-- Evaluates several requests in one call, in order, each as lua/evaluate.lua would and each
-- all-or-nothing on its own: decisions that arrive together share one round trip, one TIME and
-- one script start.
--
-- KEYS             every request's keys, request after request
-- ARGV[1]          now in Unix milliseconds, or '' to use the Redis clock (TIME)
-- ARGV[2]          Unix milliseconds by the Redis clock after which no caller of the batch
--                  waits any longer (the earliest of theirs), or '' for no such time
-- ARGV[3]          the number of requests
-- then per request: its policy count, its cost, its mode ('1' to consume, '0' to peek, 'p' or
-- 'r<at>': see `decide` in lua/prelude.lua), and per policy the algorithm, limit, window in
-- milliseconds and penalty box in milliseconds (0 for none); its keys are its policies' keys,
-- then its box keys
--
-- Returns per request { allowed, then per policy: allowed, remaining, reset_ms, retry_ms },
-- all in one flat list, then the Redis clock; or { -1, the Redis clock } when the call arrived
-- after ARGV[2] and did nothing. src/store-reply.ts decodes it; keep the two in step.

local time = redis.call('TIME')
local clock = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local expiry = tonumber(ARGV[2])
if expiry and clock > expiry then return { -1, clock } end

local now = (tonumber(ARGV[1]) or clock) - EPOCH_MS
local reply = {}
local key, arg = 1, 4
for _ = 1, tonumber(ARGV[3]) do
  local count = tonumber(ARGV[arg])
  key = key + decide(key, arg + 3, count, tonumber(ARGV[arg + 1]), now, ARGV[arg + 2], reply, #reply + 1)
  arg = arg + 3 + 4 * count
end
reply[#reply + 1] = clock
return reply
