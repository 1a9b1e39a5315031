-- The exact integer arithmetic of the rate algorithms, the twin of src/algorithms/fixed-point.ts:
-- shared so that the token bucket, GCRA and sliding window counter round alike.

-- The fixed-point units of the rate algorithms, the twin of scale in src/algorithms/fixed-point.ts:
-- returns `token`, the units a token is worth, `rate`, the units a time step adds, and `step`, in
-- ms. Policies whose limit * window is a safe integer keep token = window, rate = limit and 1 ms
-- steps, the state of earlier versions. Larger ones divide out gcd(limit, window), and if a full
-- bucket (limit * token) still passes 2^53, count time in coarser steps that divide the window
-- into at least 1000. math.fmod is exact where Lua's % rounds.
local function gcd(a, b)
  while b ~= 0 do a, b = b, math_fmod(a, b) end
  return a
end

local function scale(limit, window)
  if limit * window <= 9007199254740991 then return window, limit, 1 end
  for _, step in ipairs({ 1, 10, 100, 1000, 60000 }) do
    local steps = window / step
    if steps == math_floor(steps) and steps >= 1000 then
      local divisor = gcd(limit, steps)
      if limit / divisor * steps <= 9007199254740991 then
        return steps / divisor, limit / divisor, step
      end
    end
  end
end

-- Milliseconds from `now` until `n` more steps of `step` ms have passed since step `t`: the twin
-- of msAfter in src/algorithms/fixed-point.ts.
local function ms_after(n, t, step, now)
  if n <= 0 then return 0 end
  return (t + n) * step - now
end

-- floor(a * b / c) exactly, for a and c below 2^44 and any b below 2^53, without forming a * b:
-- long multiplication over b's base-256 digits, carrying the remainder, keeps every step below
-- 2^53. The twin of mulDiv in src/algorithms/fixed-point.ts.
local function mul_div(a, b, c)
  local place = 1
  while place * 256 <= b do place = place * 256 end
  local quotient, remainder = 0, 0
  while place >= 1 do
    local step = remainder * 256 + a * math_fmod(math_floor(b / place), 256)
    local digit = math_floor(step / c)
    quotient = quotient * 256 + digit
    remainder = step - digit * c
    place = place / 256
  end
  return quotient
end
