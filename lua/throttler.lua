-- @nestjs/throttler's storage: one `increment` of its in-memory ThrottlerStorageService (v6) as
-- one atomic call, so that every process on one Redis counts every hit exactly once. The twin of
-- src/algorithms/throttler.ts, which the memory storage runs; keep the two in step.
--
-- A key holds a record: a window of `ttl` ms, which `timeToExpire` counts down, and whether the
-- key is blocked, and until when. Under it each throttler counts its own hits, each for `ttl` ms
-- from when it came: `totalHits` is the hits of the last `ttl` ms, a sliding log. Without a block
-- (blockDuration 0 or less) a hit is refused, and not counted, while `limit` hits count. With
-- one, the hit past the limit blocks the key for blockDuration; no hit counts while it is
-- blocked, and the first after the block ends starts the count afresh. Times in the reply are
-- whole seconds, rounded up, as the guard sends them.
--
-- KEYS[1]  the key's record, a hash: `ends` (the window's end), `blocked` ('1' or '0'),
--          `block_ends`, `keep` (the latest of the ends above and of every throttler's hits:
--          both keys live until then) and `seq` (hits ever counted, which name them); times in
--          script ms (see EPOCH_MS)
-- KEYS[2]  the throttler's hits under that key, a sorted set of "<now>:<seq>" scored by when
--          each stops counting; it shares KEYS[1]'s hash tag
-- ARGV[1]  now in Unix milliseconds, or '' to use the Redis clock (TIME)
-- ARGV[2]  Unix milliseconds by the Redis clock after which the caller no longer waits for this
--          call, or '' for no such time
-- ARGV[3]  ttl: how long each hit counts, and the window's length, in whole ms
-- ARGV[4]  limit: the hits admitted per ttl
-- ARGV[5]  blockDuration in whole ms, or 0 for no block
--
-- Returns { totalHits, timeToExpire, isBlocked (1 or 0), timeToBlockExpire, the Redis clock }
-- with the times in whole seconds and timeToBlockExpire 0 unless blocked; or { the Redis clock }
-- alone when the call arrived after ARGV[2] and did nothing. Integers only, so the reply reads
-- the same over RESP2 and RESP3. src/stores/redis/redis-throttler.ts decodes it.

-- A caller past its deadline has been answered without this call: counting the hit now would
-- count one the caller's failure mode already decided.
local clock, now, late = begin(ARGV[1], ARGV[2])
if late then return { clock } end

local record, hits = KEYS[1], KEYS[2]
local ttl, limit, block_ms = ARGV[3] + 0, ARGV[4] + 0, ARGV[5] + 0
local state = redis.call('HMGET', record, 'ends', 'blocked', 'block_ends', 'keep', 'seq')
local ends = tonumber(state[1]) or now + ttl
local blocked = state[2] == '1'
local block_ends = tonumber(state[3]) or 0
local keep = tonumber(state[4]) or now
local seq = tonumber(state[5]) or 0

-- Whole seconds from now until `at`, rounded up, as ThrottlerStorageService counts them.
local function seconds_until(at)
  return math_ceil((at - now) / 1000)
end

-- A hit stops counting when its score comes.
redis.call('ZREMRANGEBYSCORE', hits, '-inf', now)
local count = redis.call('ZCARD', hits)

local function count_hit()
  seq = seq + 1
  redis.call('ZADD', hits, string_format('%d', now + ttl), string_format('%d:%d', now, seq))
  count = count + 1
  keep = math_max(keep, now + ttl)
end

local time_to_expire = seconds_until(ends)
if time_to_expire <= 0 then
  ends = now + ttl
  time_to_expire = seconds_until(ends)
end

local total, refused, time_to_block_expire
if block_ms <= 0 then
  -- Refused while `limit` hits count, until the oldest of them stops counting.
  refused = count >= limit
  if refused then
    local oldest = redis.call('ZRANGE', hits, 0, 0, 'WITHSCORES')[2]
    time_to_block_expire = time_to_expire
    if oldest then time_to_block_expire = seconds_until(oldest + 0) end
    total = count + 1
  else
    count_hit()
    total, time_to_block_expire = count, 0
  end
else
  if not blocked then count_hit() end
  if count > limit and not blocked then
    blocked, block_ends = true, now + block_ms
  end
  time_to_block_expire = seconds_until(block_ends)
  if blocked and time_to_block_expire <= 0 then
    -- The block is over: this hit starts the throttler's count afresh.
    blocked = false
    redis.call('DEL', hits)
    count = 0
    count_hit()
  end
  refused, total = blocked, count
  if not blocked then time_to_block_expire = 0 end
end

if blocked then keep = math_max(keep, block_ends) end
keep = math_max(keep, ends)
redis.call('HSET', record, 'ends', string_format('%d', ends), 'blocked', blocked and '1' or '0',
  'block_ends', string_format('%d', block_ends), 'keep', string_format('%d', keep),
  'seq', string_format('%d', seq))
-- Both keys go when nothing in them counts any more; an expiry of 0 or less deletes at once.
local expiry = string_format('%d', keep - now + EXPIRY_MARGIN_MS)
redis.call('PEXPIRE', record, expiry)
redis.call('PEXPIRE', hits, expiry)
local is_blocked = 0
if refused then is_blocked = 1 end
return { total, time_to_expire, is_blocked, time_to_block_expire, clock }
