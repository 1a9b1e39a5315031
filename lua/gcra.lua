-- GCRA (generic cell rate algorithm): one stored value, the theoretical arrival time (TAT).
--
-- A request is admitted when, after adding its emission interval (window / limit per unit of
-- cost), the TAT is at most `window` ahead of now. State "<tat> <fraction>", then the quota
-- leases out (see lua/prelude/quota.lua): the TAT is tat + fraction / rate time steps, kept
-- exact without floats. `debt` is TAT - now in 1/rate step units, where one emission interval is
-- `token` units (see `scale`: for most policies `window` and `limit`, with 1 ms steps). A bucket
-- holding `capacity - debt` units is the token bucket's view of it, which the leases cap.

-- The debt at step t, and the quota leases out (nil for none).
local function gcra_debt(state, capacity, token, rate, t, step, now)
  local tat, fraction = string_match(state, '^(%-?%d+) (%d+)$')
  local tail
  if not tat then tat, fraction, tail = string_match(state, '^(%-?%d+) (%d+)(.*)$') end
  -- A fraction written under a higher limit (a larger rate) is at most one step here.
  local debt = math_max(0, (tat - t) * rate + math_min(fraction + 0, rate - 1))
  if not tail then return debt, nil end
  local level, leases = quota_level(capacity - debt, quota_leases(tail), capacity, token, rate, t, step, now)
  return capacity - level, leases
end

-- The state for `debt` at step t, with its leases; and the ms until the TAT is now and every
-- lease's units have refilled.
local function gcra_state(debt, leases, token, rate, t, step, now)
  local due = ms_after(math_ceil(debt / rate), t, step, now)
  local tail = ''
  if leases and #leases > 0 then
    tail = quota_tail(leases)
    due = math_max(due, quota_full_ms(leases, token, rate, step, now))
  end
  return string_format('%d %d', t + math_floor(debt / rate), debt % rate) .. tail, due
end

ALGORITHMS['gcra'] = function(key, limit, window, cost, now, apply)
  local token, rate, step = scale(limit, window)
  local t = math_floor(now / step)
  local capacity = limit * token
  local debt, leases = 0, nil
  local state = read_state(key)
  if state then debt, leases = gcra_debt(state, capacity, token, rate, t, step, now) end
  local need = cost * token
  local admits = debt + need <= capacity
  if admits and apply then debt = debt + need end
  -- Until the TAT is now: the reply's reset, and the key's expiry.
  local due = ms_after(math_ceil(debt / rate), t, step, now)
  if leases then due = math_max(due, quota_full_ms(leases, token, rate, step, now)) end
  if not admits then
    local retry = -1
    if need <= capacity then
      retry = ms_after(math_ceil((debt + need - capacity) / rate), t, step, now)
    end
    return 0, math_max(0, math_floor((capacity - debt) / token)), due, retry
  end
  if apply then
    if QUOTA then
      leases = leases or {}
      leases[#leases + 1] = QUOTA
    end
    local written
    written, due = gcra_state(debt, leases, token, rate, t, step, now)
    save_state(key, written, due)
  end
  return 1, math_max(0, math_floor((capacity - debt) / token)), due, 0
end

-- Writes the debt, or drops the state once it is paid with no lease out.
local function save_debt(key, debt, leases, token, rate, t, step, now)
  if debt == 0 and not (leases and #leases > 0) then
    drop_state(key)
    return
  end
  save_state(key, gcra_state(debt, leases, token, rate, t, step, now))
end

-- A penalty moves the TAT later, past the window if it must; a refund moves it back, never
-- before now, nor below the units out on leases.
ADJUSTMENTS['gcra'] = function(key, limit, window, amount, now, at)
  local token, rate, step = scale(limit, window)
  local t = math_floor(now / step)
  local capacity = limit * token
  local debt, leases = 0, nil
  local state = read_state(key)
  if state then debt, leases = gcra_debt(state, capacity, token, rate, t, step, now) end
  local floor = 0
  if leases then floor = quota_out(leases, now + 1) * token end
  debt = math_max(floor, debt + amount * token)
  save_debt(key, debt, leases, token, rate, t, step, now)
end

-- Ends a quota lease: its unused units go back, as a refund of them would.
QUOTA_RETURNS['gcra'] = function(key, limit, window, unused, now, at, ends, id)
  local token, rate, step = scale(limit, window)
  local t = math_floor(now / step)
  local capacity = limit * token
  local state = read_state(key)
  if not state then return end
  local debt, leases = gcra_debt(state, capacity, token, rate, t, step, now)
  if not leases then return end
  local found
  leases, found = quota_end(leases, id, now)
  if not found then return end
  debt = math_max(quota_out(leases, now + 1) * token, debt - unused * token)
  save_debt(key, debt, leases, token, rate, t, step, now)
end
