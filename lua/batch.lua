-- Evaluates several requests in one call, in order, each as lua/evaluate.lua would and each
-- all-or-nothing on its own: decisions that arrive together share one round trip, one TIME and
-- one script start.
--
-- KEYS             every request's keys, request after request
-- ARGV[1]          now in Unix milliseconds, or '' to use the Redis clock (TIME)
-- ARGV[2]          Unix milliseconds by the Redis clock after which no caller of the batch
--                  waits any longer (the earliest of theirs), or '' for no such time
-- ARGV[3]          the number of requests; negative when they all share one plan, cost and
--                  mode, which then follow the plans once
-- ARGV[4]          the number of plans: the distinct policy lists of the batch's requests
-- then per plan: its policy count, and per policy the algorithm, limit, window in milliseconds
-- and penalty box in milliseconds (0 for none); then per request: its plan (from 1), its cost
-- and its mode ('1' to consume, '0' to peek, 'p' or 'r<at>': see `decide` in
-- lua/prelude/decision.lua). A request's keys are its policies' keys, then its box keys.
--
-- Returns each request's answer as lua/evaluate.lua gives it, without the clock, all in one flat
-- list, then the Redis clock; or { the Redis clock } alone when the call arrived after ARGV[2]
-- and did nothing. src/stores/redis/reply.ts decodes it; keep the two in step.

local clock, now, late = begin(ARGV[1], ARGV[2])
if late then return { clock } end

-- Each plan's policy count and where its policies start in ARGV: requests name a plan rather
-- than repeat its policies, which halves a one-policy request's arguments. Each policy's limit,
-- window and box become numbers here, once, rather than parsed again by every request that
-- `decide`s them: 3% of what Redis runs for a batched token-bucket decision, counted by callgrind.
local counts, starts = {}, {}
local arg = 5
for plan = 1, ARGV[4] + 0 do
  local count = ARGV[arg] + 0
  counts[plan], starts[plan] = count, arg + 1
  for a = arg + 1, arg + ARGS_PER_POLICY * count, ARGS_PER_POLICY do
    ARGV[a + 1], ARGV[a + 2], ARGV[a + 3] = ARGV[a + 1] + 0, ARGV[a + 2] + 0, ARGV[a + 3] + 0
  end
  arg = arg + 1 + ARGS_PER_POLICY * count
end
local reply = {}
local n = 1
local key = 1
local requests = ARGV[3] + 0
-- Requests alike, the usual batch, are described once: three arguments fewer per request.
local alike = requests < 0
if alike then requests = -requests end
local plan, cost, mode
for i = 1, requests do
  if i == 1 or not alike then
    plan, cost, mode = ARGV[arg] + 0, ARGV[arg + 1] + 0, ARGV[arg + 2]
    arg = arg + 3
  end
  key = key + decide(key, starts[plan], counts[plan], cost, now, mode)
  n = answer(counts[plan], reply, n)
end
reply[n] = clock
flush_states()
return reply
