-- A call's layout: each policy's arguments, and the reply `answer` writes from `decide`'s
-- outcomes. Shared by both entry scripts, which read the one and return the other.

-- Decimal strings (arguments, stored states, TIME's reply) become numbers by arithmetic, as in
-- `ARGV[2] + 0`, which parses a string once where tonumber() parses it twice: 6% of a token-bucket
-- call, counted by callgrind. tonumber() stays for values that may be empty or missing, for which
-- it answers nil.

-- Each policy comes as ARGS_PER_POLICY arguments (algorithm, limit, window, box). `decide`
-- works out FIELDS_PER_POLICY fields for each (allowed, remaining, reset_ms, retry_ms) in
-- OUTCOMES, and `answer` writes them into the reply in as few integers as say the same:
-- `remaining, reset_ms` for a policy that admits, whose retry is 0, and `-1 - remaining,
-- reset_ms, retry_ms` for one that refuses; a request admits when all its policies do. The
-- client decodes each integer at a cost (ioredis 6 about 150 ns), so an admitted one-policy
-- request answers with two, not five.
local ARGS_PER_POLICY = 4
local FIELDS_PER_POLICY = 4
local OUTCOMES = {}

-- Writes the outcomes of `decide` for `count` policies into `reply` from `n` (see
-- FIELDS_PER_POLICY); returns where the next goes.
local function answer(count, reply, n)
  for o = 1, FIELDS_PER_POLICY * count, FIELDS_PER_POLICY do
    if OUTCOMES[o] == 1 then
      reply[n], reply[n + 1] = OUTCOMES[o + 1], OUTCOMES[o + 2]
      n = n + 2
    else
      reply[n], reply[n + 1], reply[n + 2] = -1 - OUTCOMES[o + 1], OUTCOMES[o + 2], OUTCOMES[o + 3]
      n = n + 3
    end
  end
  return n
end
