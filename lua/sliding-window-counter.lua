-- Sliding window counter: the counts of the current and the previous fixed window, the previous
-- one weighted by how much of it the sliding window still overlaps.
--
-- State "<window_index> <current> <previous>". The previous window counts for the requests of it
-- the sliding window still overlaps, rounded up to whole ones: compared with whole requests, that
-- decides exactly as the weighted sum would, and mul_div forms no product of limit and window.
ALGORITHMS['sliding-window-counter'] = function(key, limit, window, cost, now, apply)
  local absolute = now + EPOCH_MS
  local index = math_floor(absolute / window)
  local current, previous = 0, 0
  local state = read_state(key)
  if state then
    local stored, c, p = string_match(state, '^(%d+) (%d+) (%d+)$')
    stored = stored + 0
    -- A later window only appears if the clock stepped back: stay in it rather than forget it.
    if stored >= index then
      index, current, previous = stored, c + 0, p + 0
    elseif stored == index - 1 then
      previous = c + 0
    end
  end
  -- Time into the window; negative only after a step back, when the previous window weighs fully.
  local into = absolute - index * window
  local elapsed = math_max(0, into)
  local weighted = previous - mul_div(previous, elapsed, window)
  -- A key that already counts in this window expires with the next one, as it will after this.
  local counted = current > 0
  local allowed = 0
  if current + weighted + cost <= limit then
    allowed = 1
    if apply then current = current + cost end
  end
  -- Full again once the previous window has slid out, and the current one too if it counts.
  local ends_in = window - into
  local reset = 0
  if current > 0 then
    reset = ends_in + window
  elseif previous > 0 then
    reset = ends_in
  end
  local remaining = math_max(0, limit - current - weighted)
  if allowed == 1 then
    if apply then
      save_state(key, string_format('%d %d %d', index, current, previous), reset, counted)
      -- A quota lease ends with the fixed window it counts in, so that every unit spent counts
      -- in the window it was spent in.
      if QUOTA then QUOTA[3] = math_min(QUOTA[3], now + ends_in) end
    end
    return 1, remaining, reset, 0
  end
  if cost > limit then return 0, remaining, reset, -1 end
  if current + cost <= limit then
    -- Admitted later in this window, once enough of the previous one has slid out.
    local slide = mul_div(limit - current - cost, window, previous)
    return 0, remaining, reset, window - slide - into
  end
  -- Admitted in the next window, where this window's count becomes the previous one.
  local slide = mul_div(limit - cost, window, current)
  return 0, remaining, reset, ends_in + math_max(0, window - slide)
end

-- A penalty counts more in the current window; a refund counts less in the window it was
-- charged in, while that is the current one or the previous one, which still weighs.
ADJUSTMENTS['sliding-window-counter'] = function(key, limit, window, amount, now, at)
  local absolute = now + EPOCH_MS
  local index = math_floor(absolute / window)
  local current, previous = 0, 0
  local state = read_state(key)
  if state then
    local stored, c, p = string_match(state, '^(%d+) (%d+) (%d+)$')
    stored = stored + 0
    if stored >= index then
      index, current, previous = stored, c + 0, p + 0
    elseif stored == index - 1 then
      previous = c + 0
    end
  end
  if not at then
    current = current + amount
  else
    local charged = math_floor((at + EPOCH_MS) / window)
    if charged == index then
      current = math_max(0, current + amount)
    elseif charged == index - 1 then
      previous = math_max(0, previous + amount)
    else
      return
    end
  end
  local ends_in = window - (absolute - index * window)
  local reset = ends_in
  if current > 0 then reset = ends_in + window end
  if current == 0 and previous == 0 then
    drop_state(key)
  else
    save_state(key, string_format('%d %d %d', index, current, previous), reset)
  end
end

-- Ends a quota lease: its unused units are given back to the window it was taken in, as a
-- refund of them would.
QUOTA_RETURNS['sliding-window-counter'] = function(key, limit, window, unused, now, at, ends, id)
  if unused > 0 then ADJUSTMENTS['sliding-window-counter'](key, limit, window, -unused, now, at) end
end
