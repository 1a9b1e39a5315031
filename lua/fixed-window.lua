-- Fixed window: a counter per window. Windows are aligned to the epoch, so every key resets at
-- the same moment. A quota lease counts its units in the window it is taken in, and ends with it:
-- its units are then spent in that window, or given back to it.
--
-- State "<window_index> <count>"; a stored index other than the current one means an old window,
-- so a key that outlives its window (see EXPIRY_MARGIN_MS) counts nothing.
ALGORITHMS['fixed-window'] = function(key, limit, window, cost, now, apply)
  local absolute = now + EPOCH_MS
  local index = math_floor(absolute / window)
  local used = 0
  local state = read_state(key)
  if state then
    local stored, count = string_match(state, '^(%d+) (%d+)$')
    stored = stored + 0
    -- A later window only appears if the clock stepped back: stay in it rather than forget it.
    if stored >= index then index, used = stored, count + 0 end
  end
  local ends_in = (index + 1) * window - absolute
  if used + cost <= limit then
    if apply then
      -- A key that already counts in this window expires as it should.
      local kept = used > 0
      used = used + cost
      save_state(key, string_format('%d %d', index, used), ends_in, kept)
      -- A quota lease ends with the window it counts in.
      if QUOTA then QUOTA[3] = math_min(QUOTA[3], now + ends_in) end
    end
    if used == 0 then return 1, limit, 0, 0 end
    return 1, limit - used, ends_in, 0
  end
  local retry = -1
  if cost <= limit then retry = ends_in end
  return 0, math_max(0, limit - used), ends_in, retry
end

-- A penalty counts more in the current window, past the limit if it must; a refund counts less,
-- only while the window it was charged in is the current one.
ADJUSTMENTS['fixed-window'] = function(key, limit, window, amount, now, at)
  local absolute = now + EPOCH_MS
  local index = math_floor(absolute / window)
  local used = 0
  local state = read_state(key)
  if state then
    local stored, count = string_match(state, '^(%d+) (%d+)$')
    stored = stored + 0
    if stored >= index then index, used = stored, count + 0 end
  end
  if at and math_floor((at + EPOCH_MS) / window) ~= index then return end
  used = math_max(0, used + amount)
  if used == 0 then
    drop_state(key)
  else
    save_state(key, string_format('%d %d', index, used), (index + 1) * window - absolute)
  end
end

-- Ends a quota lease: its unused units are given back to the window it was taken in, while that
-- is the current one.
QUOTA_RETURNS['fixed-window'] = function(key, limit, window, unused, now, at, ends, id)
  if unused > 0 then ADJUSTMENTS['fixed-window'](key, limit, window, -unused, now, at) end
end
