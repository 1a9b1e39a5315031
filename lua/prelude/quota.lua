-- Quota leases in a bucket's state: shared by the token bucket and GCRA, whose budget refills.
--
-- A lease is a debit: its units leave the bucket when it is taken, as a consume of them would.
-- Its holder spends them locally until the lease ends, so they must keep occupying the bucket
-- until then: a bucket that refilled past them would admit them a second time, a double burst.
-- So each lease stays in the state, after the algorithm's own fields, as " <id>:<units>:<ends>"
-- (`ends` in scripts' ms), and the level is capped at the capacity less the units out. When a
-- lease ends unreturned, its units count as spent at its end and refill from then: the cap it
-- set then, raised by what has refilled since, still holds (see docs/leases.md for the proof).

-- The leases of a state's tail, as { id, units, ends } records.
local function quota_leases(tail)
  local leases = {}
  for id, units, ends in string.gmatch(tail, ' (%w+):(%d+):(%-?%d+)') do
    leases[#leases + 1] = { id, units + 0, ends + 0 }
  end
  return leases
end

-- Units out just before `ends`: those of the leases ending at or after it.
local function quota_out(leases, ends)
  local out = 0
  for i = 1, #leases do
    if leases[i][3] >= ends then out = out + leases[i][2] end
  end
  return out
end

-- The level `level` (fixed point, refilled to step t without regard to leases) may have under
-- `leases`: at most the capacity less the units out now, and at most what each lease that has
-- ended since left, refilled since. Returns that level and the leases still out.
local function quota_level(level, leases, capacity, token, rate, t, step, now)
  local live, out = {}, 0
  for i = 1, #leases do
    local lease = leases[i]
    if lease[3] > now then
      out = out + lease[2]
      live[#live + 1] = lease
    else
      local ended = math_ceil(lease[3] / step)
      local left = capacity - quota_out(leases, lease[3]) * token
      level = math_min(level, left + math_max(0, t - ended) * rate)
    end
  end
  return math_min(level, capacity - out * token), live
end

-- The state's tail for `leases`.
local function quota_tail(leases)
  local parts = {}
  for i = 1, #leases do
    parts[i] = string_format(' %s:%d:%d', leases[i][1], leases[i][2], leases[i][3])
  end
  return table.concat(parts)
end

-- Ms from `now` until the caps of `leases` let the bucket be full: each lease's end, plus the
-- time the units out until then take to refill; 0 for no lease.
local function quota_full_ms(leases, token, rate, step, now)
  local full = 0
  for i = 1, #leases do
    local ended = math_ceil(leases[i][3] / step)
    local refill = math_ceil(quota_out(leases, leases[i][3]) * token / rate)
    full = math_max(full, (ended + refill) * step - now)
  end
  return full
end

-- Ends the lease `id` of `leases` at `now`, if it is still out: returns the leases left and
-- whether it was found.
local function quota_end(leases, id, now)
  local left, found = {}, false
  for i = 1, #leases do
    if leases[i][1] == id and leases[i][3] > now then found = true else left[#left + 1] = leases[i] end
  end
  return left, found
end
