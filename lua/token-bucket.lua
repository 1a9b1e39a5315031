-- Token bucket: holds up to `limit` tokens and refills `limit` tokens per `window`.
--
-- State "<level> <updated_at>". The level is fixed point: a token is `token` units and each time
-- step adds `rate` units (see `scale`: for most policies `window` and `limit`, with 1 ms steps),
-- so a refill of any rate is an exact integer. The part of the elapsed time that has not yet
-- become a whole token stays in the level; it is never thrown away by resetting the refill
-- clock, which would starve slow rates (10/min called every 5 s would earn a token every 10 s
-- instead of every 6 s). `updated_at` and `t` count steps.
ALGORITHMS['token-bucket'] = function(key, limit, window, cost, now, apply)
  local token, rate, step = scale(limit, window)
  local t = math.floor(now / step)
  local capacity = limit * token
  local level = capacity
  local updated = t
  local state = read_state(key)
  if state then
    -- The level is below zero only after a penalty took more than was left.
    local stored, at = string.match(state, '^(%-?%d+) (%-?%d+)$')
    at = at + 0
    if at > t then updated = at end
    level = math.min(capacity, stored + (updated - at) * rate)
  end
  local need = cost * token
  local admits = level >= need
  if admits and apply then level = level - need end
  -- Until the bucket is full again: the reply's reset, and the key's expiry.
  local full = ms_after(math.ceil((capacity - level) / rate), t, step, now)
  if not admits then
    local retry = -1
    if need <= capacity then retry = ms_after(math.ceil((need - level) / rate), t, step, now) end
    return 0, math.max(0, math.floor(level / token)), full, retry
  end
  if apply then
    save_state(key, string.format('%d %d', level, updated), full)
  end
  return 1, math.floor(level / token), full, 0
end

-- A penalty takes tokens whatever is left, down into debt that refills like any level; a refund
-- puts tokens back, up to a full bucket.
ADJUSTMENTS['token-bucket'] = function(key, limit, window, amount, now, at)
  local token, rate, step = scale(limit, window)
  local t = math.floor(now / step)
  local capacity = limit * token
  local level, updated = capacity, t
  local state = read_state(key)
  if state then
    local stored, last = string.match(state, '^(%-?%d+) (%-?%d+)$')
    last = last + 0
    if last > t then updated = last end
    level = math.min(capacity, stored + (updated - last) * rate)
  end
  level = math.min(capacity, level - amount * token)
  local full = ms_after(math.ceil((capacity - level) / rate), t, step, now)
  if full <= 0 then
    drop_state(key)
  else
    save_state(key, string.format('%d %d', level, updated), full)
  end
end
