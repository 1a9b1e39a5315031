-- GCRA (generic cell rate algorithm): one stored value, the theoretical arrival time (TAT).
--
-- A request is admitted when, after adding its emission interval (window / limit per unit of
-- cost), the TAT is at most `window` ahead of now. State "<tat_ms> <fraction>": the TAT is
-- tat_ms + fraction / limit milliseconds, kept exact without floats. `debt` is TAT - now in
-- 1/limit ms units, where one emission interval is `window` units.
ALGORITHMS['gcra'] = function(key, limit, window, cost, now, apply)
  local capacity = limit * window
  local debt = 0
  local state = redis.call('GET', key)
  if state then
    local tat, fraction = string.match(state, '^(%-?%d+) (%d+)$')
    debt = math.max(0, (tonumber(tat) - now) * limit + tonumber(fraction))
  end
  local need = cost * window
  if debt + need <= capacity then
    if apply then
      debt = debt + need
      redis.call('SET', key, string.format('%d %d', now + math.floor(debt / limit), debt % limit),
        'PX', math.ceil(debt / limit))
    end
    return 1, math.floor((capacity - debt) / window), math.ceil(debt / limit), 0
  end
  local retry = -1
  if need <= capacity then retry = math.ceil((debt + need - capacity) / limit) end
  return 0, math.floor((capacity - debt) / window), math.ceil(debt / limit), retry
end
