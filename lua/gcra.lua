-- GCRA (generic cell rate algorithm): one stored value, the theoretical arrival time (TAT).
--
-- A request is admitted when, after adding its emission interval (window / limit per unit of
-- cost), the TAT is at most `window` ahead of now. State "<tat> <fraction>": the TAT is
-- tat + fraction / rate time steps, kept exact without floats. `debt` is TAT - now in 1/rate
-- step units, where one emission interval is `token` units (see `scale`: for most policies
-- `window` and `limit`, with 1 ms steps).
ALGORITHMS['gcra'] = function(key, limit, window, cost, now, apply)
  local token, rate, step = scale(limit, window)
  local t = math.floor(now / step)
  local capacity = limit * token
  local debt = 0
  local state = read_state(key)
  if state then
    local tat, fraction = string.match(state, '^(%-?%d+) (%d+)$')
    -- A fraction written under a higher limit (a larger rate) is at most one step here.
    debt = math.max(0, (tat - t) * rate + math.min(fraction + 0, rate - 1))
  end
  local need = cost * token
  local admits = debt + need <= capacity
  if admits and apply then debt = debt + need end
  -- Until the TAT is now: the reply's reset, and the key's expiry.
  local due = ms_after(math.ceil(debt / rate), t, step, now)
  if not admits then
    local retry = -1
    if need <= capacity then
      retry = ms_after(math.ceil((debt + need - capacity) / rate), t, step, now)
    end
    return 0, math.max(0, math.floor((capacity - debt) / token)), due, retry
  end
  if apply then
    save_state(key, string.format('%d %d', t + math.floor(debt / rate), debt % rate), due)
  end
  return 1, math.max(0, math.floor((capacity - debt) / token)), due, 0
end

-- A penalty moves the TAT later, past the window if it must; a refund moves it back, never
-- before now.
ADJUSTMENTS['gcra'] = function(key, limit, window, amount, now, at)
  local token, rate, step = scale(limit, window)
  local t = math.floor(now / step)
  local debt = 0
  local state = read_state(key)
  if state then
    local tat, fraction = string.match(state, '^(%-?%d+) (%d+)$')
    debt = math.max(0, (tat - t) * rate + math.min(fraction + 0, rate - 1))
  end
  debt = math.max(0, debt + amount * token)
  if debt == 0 then
    drop_state(key)
    return
  end
  save_state(key, string.format('%d %d', t + math.floor(debt / rate), debt % rate),
    ms_after(math.ceil(debt / rate), t, step, now))
end
