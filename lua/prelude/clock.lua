-- The scripts' time: the epoch their milliseconds count from, and `begin`, which starts every
-- call on Redis's clock. Shared so that every algorithm, on every gateway, reads the same now.

-- Times in scripts are milliseconds since 2024-01-01T00:00:00Z, so stored numbers stay short
-- and every sum stays an exact integer in Lua's doubles. The offset is a whole number of days,
-- so windows that divide a day still align with the Unix epoch.
local EPOCH_MS = 1704067200000

-- Begins a call of an entry script, with none of the last call's state (lua/prelude/state.lua):
-- `given` is its ARGV[1], `expiry` the Unix ms by the Redis clock after which its caller no
-- longer waits, as the argument came ('' for none): parsed once here, where tonumber() parses
-- a string twice (see lua/prelude/reply.lua). Returns the Redis clock in Unix ms, the call's
-- now (scripts' ms, see EPOCH_MS) and whether the call arrived past its expiry: its caller has
-- then been answered without it and may send it again, so it must do nothing.
local function begin(given, expiry)
  use_standard()
  for key in next, STATES do STATES[key] = nil end
  for i = 1, DIRTY_N do DIRTY[DIRTY_KEYS[i]] = nil end
  GIVEN_NOW, HELD, DIRTY_N, QUOTA = tonumber(given), nil, 0, nil
  local time = redis.call('TIME')
  local clock = time[1] * 1000 + math_floor(time[2] / 1000)
  -- One clock for every gateway: theirs drift, Redis's is shared.
  return clock, (GIVEN_NOW or clock) - EPOCH_MS, expiry ~= '' and clock > expiry + 0
end
