-- Evaluates one request against every policy of an identity, all-or-nothing, in one call.
--
-- KEYS[i]          state key of policy i, then the box key of each policy with a box, in
--                  order; all keys share the identity's hash tag
-- ARGV[1]          now in Unix milliseconds, or '' to use the Redis clock (TIME)
-- ARGV[2]          cost of the request, a positive integer
-- ARGV[3]          '1' to consume, '0' to only look (peek), 'p' to take the cost as a
--                  penalty, 'r<at>' to give back the cost of a consume charged at script time
--                  <at> (see `decide` in lua/prelude/decision.lua), or 'l<units>:<ms>:<id>'
--                  to consume and take a quota lease of `units` more (see `take_quota_lease`)
-- ARGV[4]          Unix milliseconds by the Redis clock after which the caller no longer waits
--                  for this call, or '' for no such time
-- ARGV[4i+1]       algorithm of policy i (from 1)
-- ARGV[4i+2]       limit of policy i
-- ARGV[4i+3]       window of policy i, in milliseconds
-- ARGV[4i+4]       penalty box of policy i in milliseconds, or 0 for none
--
-- Returns { per policy `remaining, reset_ms` if it admits, `-1 - remaining, reset_ms, retry_ms`
-- if not (see `answer` in lua/prelude/reply.lua), for mode 'l' then the units leased and the ms
-- until the lease ends (0 and 0 for none), then the Redis clock in Unix milliseconds }, or
-- { the Redis clock } alone when the call arrived after ARGV[4] and did nothing. Integers only,
-- so the reply reads the same over RESP2 and RESP3. src/stores/redis/reply.ts decodes it; keep
-- the two in step.

-- A caller past its deadline has been answered without this call: consuming now would charge a
-- request that was never told it counted.
local clock, now, late = begin(ARGV[1], ARGV[4])
if late then return { clock } end

local count = (#ARGV - 4) / ARGS_PER_POLICY
local mode = ARGV[3]
local leased, lease_ms
if string_byte(mode) == 108 then
  leased, lease_ms = take_quota_lease(1, 5, count, ARGV[2] + 0, now, mode)
else
  decide(1, 5, count, ARGV[2] + 0, now, mode)
end
-- Sized up front for one policy, the usual call: a table filled field by field is reallocated
-- each time it outgrows a power of two, a few percent of the call's time on Redis. The reply
-- ends at its first nil.
local reply
if count == 1 then reply = { 0, 0, 0, 0 } else reply = {} end
local n = answer(count, reply, 1)
if leased then
  reply[n], reply[n + 1] = leased, lease_ms
  n = n + 2
end
reply[n], reply[n + 1] = clock, nil
flush_states()
return reply
