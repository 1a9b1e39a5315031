-- Sliding window log: a sorted set of the admitted requests' times. Exact, at a memory cost of
-- one entry per admitted unit of cost.
--
-- Scores are times; members are "<time>:<sequence>" so that requests sharing a millisecond stay
-- distinct. Only admitted requests are recorded, and the units of a quota lease at its end.
-- Adds `count` entries at time `at`, numbered on from `sequence`. ZADD in batches: unpack() is
-- bounded by Lua's stack.
local function add_entries(key, at, count, sequence)
  local batch = {}
  for i = 1, count do
    batch[#batch + 1] = at
    batch[#batch + 1] = string_format('%d:%d', at, sequence + i)
    if #batch == 1000 or i == count then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
    end
  end
end

-- Records `cost` admitted requests at `now`, behind `used` live ones, and sets the key's expiry.
-- Returns the ms until the newest entry leaves the window.
local function record_log(key, window, cost, now, used)
  -- Members at one time are numbered 1..n; they leave the window together, so numbering on
  -- from the count at `now` keeps them unique. Only a clock that stepped back, or a quota lease,
  -- leaves entries newer than now, which then also set the expiry.
  local newest, sequence = now, 0
  if used > 0 then
    newest = math_max(now, redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2] + 0)
    if newest >= now then sequence = redis.call('ZCOUNT', key, now, now) end
  end
  add_entries(key, now, cost, sequence)
  local reset = newest + window - now
  redis.call('PEXPIRE', key, reset + EXPIRY_MARGIN_MS)
  return reset
end

-- Records a consume of `cost` at `now` that takes a quota lease of `units` ending at `ends`. The
-- lease's units are recorded at its end, the latest time they can be spent, so that each counts
-- in every window that would count it where it is spent. Returns the ms until the newest entry
-- leaves the window.
local function record_lease(key, window, cost, units, ends, now, used)
  if cost > 0 then record_log(key, window, cost, now, used) end
  add_entries(key, ends, units, redis.call('ZCOUNT', key, ends, ends))
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2] + 0
  local reset = newest + window - now
  redis.call('PEXPIRE', key, reset + EXPIRY_MARGIN_MS)
  return reset
end

WRITES_ITSELF['sliding-window-log'] = true

ALGORITHMS['sliding-window-log'] = function(key, limit, window, cost, now, apply)
  -- Dropping expired entries changes no decision, so it is safe even when nothing is consumed.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local used = redis.call('ZCARD', key)
  if used + cost <= limit and apply then
    local reset
    if QUOTA then
      reset = record_lease(key, window, cost - QUOTA[2], QUOTA[2], QUOTA[3], now, used)
    else
      reset = record_log(key, window, cost, now, used)
    end
    return 1, math_max(0, limit - used - cost), reset, 0
  end
  local reset = 0
  if used > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = newest[2] + window - now
  end
  local remaining = math_max(0, limit - used)
  if used + cost <= limit then return 1, remaining, reset, 0 end
  if cost > limit then return 0, remaining, reset, -1 end
  -- Admitted once the oldest (used + cost - limit) entries have left the window.
  local blocking = redis.call('ZRANGE', key, used + cost - limit - 1, used + cost - limit - 1, 'WITHSCORES')
  return 0, remaining, reset, blocking[2] + window - now
end

-- A penalty records entries at now, past the limit if it must: at most `limit` of them, since
-- more would keep the identity out no longer. A refund removes entries recorded at the time it
-- was charged, which are alike whichever request wrote them, while they are still in the window.
ADJUSTMENTS['sliding-window-log'] = function(key, limit, window, amount, now, at)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if at then
    -- The entries at one time are numbered 1..count: removing the last ones keeps them so.
    local count = redis.call('ZCOUNT', key, at, at)
    local batch = {}
    for i = count - math_min(-amount, count) + 1, count do
      batch[#batch + 1] = string_format('%d:%d', at, i)
      if #batch == 1000 or i == count then
        redis.call('ZREM', key, unpack(batch))
        batch = {}
      end
    end
    return
  end
  record_log(key, window, math_min(amount, limit), now, redis.call('ZCARD', key))
end

-- Ends a quota lease: its unused units, recorded at its end, are removed.
QUOTA_RETURNS['sliding-window-log'] = function(key, limit, window, unused, now, at, ends, id)
  if unused > 0 then ADJUSTMENTS['sliding-window-log'](key, limit, window, -unused, now, ends) end
end
