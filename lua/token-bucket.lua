-- Token bucket: holds up to `limit` tokens and refills `limit` tokens per `window`.
--
-- State "<level> <updated_at>", then the quota leases out (see lua/prelude/quota.lua). The level
-- is fixed point: a token is `token` units and each time step adds `rate` units (see `scale`:
-- for most policies `window` and `limit`, with 1 ms steps), so a refill of any rate is an exact
-- integer. The part of the elapsed time that has not yet become a whole token stays in the
-- level; it is never thrown away by resetting the refill clock, which would starve slow rates
-- (10/min called every 5 s would earn a token every 10 s instead of every 6 s). `updated_at` and
-- `t` count steps.

-- The bucket at step t: its level, and the quota leases out (nil for none).
local function bucket_level(state, capacity, token, rate, t, step, now)
  local stored, at = string_match(state, '^(%-?%d+) (%-?%d+)$')
  local tail
  if not stored then stored, at, tail = string_match(state, '^(%-?%d+) (%-?%d+)(.*)$') end
  at = at + 0
  local updated = t
  if at > t then updated = at end
  local level = math_min(capacity, stored + (updated - at) * rate)
  if not tail then return level, updated, nil end
  local leases
  level, leases = quota_level(level, quota_leases(tail), capacity, token, rate, t, step, now)
  return level, updated, leases
end

-- Writes the bucket, or drops it once full with no lease out.
local function save_bucket(key, level, updated, leases, capacity, rate, token, t, step, now)
  local full = ms_after(math_ceil((capacity - level) / rate), t, step, now)
  local tail = ''
  if leases and #leases > 0 then
    tail = quota_tail(leases)
    full = math_max(full, quota_full_ms(leases, token, rate, step, now))
  end
  if full <= 0 then
    drop_state(key)
  else
    save_state(key, string_format('%d %d', level, updated) .. tail, full)
  end
  return full
end

ALGORITHMS['token-bucket'] = function(key, limit, window, cost, now, apply)
  local token, rate, step = scale(limit, window)
  local t = math_floor(now / step)
  local capacity = limit * token
  local level, updated, leases = capacity, t, nil
  local state = read_state(key)
  if state then level, updated, leases = bucket_level(state, capacity, token, rate, t, step, now) end
  local need = cost * token
  local admits = level >= need
  if admits and apply then level = level - need end
  -- Until the bucket is full again: the reply's reset, and the key's expiry.
  local full = ms_after(math_ceil((capacity - level) / rate), t, step, now)
  if leases then full = math_max(full, quota_full_ms(leases, token, rate, step, now)) end
  if not admits then
    local retry = -1
    if need <= capacity then retry = ms_after(math_ceil((need - level) / rate), t, step, now) end
    return 0, math_max(0, math_floor(level / token)), full, retry
  end
  if apply then
    if QUOTA then
      leases = leases or {}
      leases[#leases + 1] = QUOTA
      full = math_max(full, quota_full_ms(leases, token, rate, step, now))
    end
    local tail = ''
    if leases and #leases > 0 then tail = quota_tail(leases) end
    save_state(key, string_format('%d %d', level, updated) .. tail, full)
  end
  return 1, math_floor(level / token), full, 0
end

-- A penalty takes tokens whatever is left, down into debt that refills like any level; a refund
-- puts tokens back, up to a full bucket less the units out on leases.
ADJUSTMENTS['token-bucket'] = function(key, limit, window, amount, now, at)
  local token, rate, step = scale(limit, window)
  local t = math_floor(now / step)
  local capacity = limit * token
  local level, updated, leases = capacity, t, nil
  local state = read_state(key)
  if state then level, updated, leases = bucket_level(state, capacity, token, rate, t, step, now) end
  local top = capacity
  if leases then top = capacity - quota_out(leases, now + 1) * token end
  level = math_min(top, level - amount * token)
  save_bucket(key, level, updated, leases, capacity, rate, token, t, step, now)
end

-- Ends a quota lease: its unused units go back, up to a full bucket less the units still out.
QUOTA_RETURNS['token-bucket'] = function(key, limit, window, unused, now, at, ends, id)
  local token, rate, step = scale(limit, window)
  local t = math_floor(now / step)
  local capacity = limit * token
  local state = read_state(key)
  if not state then return end
  local level, updated, leases = bucket_level(state, capacity, token, rate, t, step, now)
  if not leases then return end
  local found
  leases, found = quota_end(leases, id, now)
  if not found then return end
  level = math_min(capacity - quota_out(leases, now + 1) * token, level + unused * token)
  save_bucket(key, level, updated, leases, capacity, rate, token, t, step, now)
end
