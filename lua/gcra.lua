-- GCRA (generic cell rate algorithm): one stored value, the theoretical arrival time (TAT).
--
-- A request is admitted when, after adding its emission interval (window / limit per unit of
-- cost), the TAT is at most `window` ahead of now. State "<tat_ms> <fraction>": the TAT is
-- tat_ms + fraction / rate milliseconds, kept exact without floats. `debt` is TAT - now in
-- 1/rate ms units, where one emission interval is `token` units (`scale` gives both: `limit`
-- and `window`, with their large common divisor taken out).
ALGORITHMS['gcra'] = function(key, limit, window, cost, now, apply)
  local token, rate = scale(limit, window)
  local capacity = limit * token
  local debt = 0
  local state = redis.call('GET', key)
  if state then
    local tat, fraction = string.match(state, '^(%-?%d+) (%d+)$')
    debt = math.max(0, (tonumber(tat) - now) * rate + tonumber(fraction))
  end
  local need = cost * token
  if debt + need <= capacity then
    if apply then
      debt = debt + need
      redis.call('SET', key, string.format('%d %d', now + math.floor(debt / rate), debt % rate),
        'PX', math.ceil(debt / rate))
    end
    return 1, math.floor((capacity - debt) / token), math.ceil(debt / rate), 0
  end
  local retry = -1
  if need <= capacity then retry = math.ceil((debt + need - capacity) / rate) end
  return 0, math.floor((capacity - debt) / token), math.ceil(debt / rate), retry
end
