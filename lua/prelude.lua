-- Shared by every script: the epoch and the table the algorithm files register into.

-- Times in scripts are milliseconds since 2024-01-01T00:00:00Z, so stored numbers stay short
-- and every sum stays an exact integer in Lua's doubles. The offset is a whole number of days,
-- so windows that divide a day still align with the Unix epoch.
local EPOCH_MS = 1704067200000

-- Decimal strings (arguments, stored states, TIME's reply) become numbers by arithmetic, as in
-- `ARGV[2] + 0`, which parses a string once where tonumber() parses it twice: 6% of a token-bucket
-- call, counted by callgrind. tonumber() stays for values that may be empty or missing, for which
-- it answers nil.

-- Each policy comes as ARGS_PER_POLICY arguments (algorithm, limit, window, box). `decide`
-- works out FIELDS_PER_POLICY fields for each (allowed, remaining, reset_ms, retry_ms) in
-- OUTCOMES, and `answer` writes them into the reply in as few integers as say the same:
-- `remaining, reset_ms` for a policy that admits, whose retry is 0, and `-1 - remaining,
-- reset_ms, retry_ms` for one that refuses; a request admits when all its policies do. The
-- client decodes each integer at a cost (ioredis 6 about 150 ns), so an admitted one-policy
-- request answers with two, not five.
local ARGS_PER_POLICY = 4
local FIELDS_PER_POLICY = 4
local OUTCOMES = {}

-- algorithm name -> function(key, limit, window, cost, now, apply)
--   returns allowed (1|0), remaining, reset_ms (until full again), retry_ms (0 if allowed, -1 never)
--   and writes the new state only when apply is true and the request is allowed.
local ALGORITHMS = {}

-- algorithm name -> function(key, limit, window, amount, now, at)
--   takes `amount` more (a penalty) whatever is left, or with a negative amount and `at`, the
--   time a consume was charged at, gives that much back (a refund): never past a full limit,
--   and never into a window other than the one charged.
local ADJUSTMENTS = {}

-- algorithm name -> true for one whose state is not one string written by save_state (the
-- sliding-window log's sorted set, written by its own commands): its writes cannot be held
-- back (see `decide`).
local WRITES_ITSELF = {}

-- The states this call has read or written, by key (false: none), so that a key is read from
-- Redis once per call: by a decision that looks at it more than once (see `decide`), and by
-- each request of a batch that decides the same identity. Every GET, SET and DEL of a state or
-- box key goes through read_state, write_state and drop_state, so the table always holds what
-- Redis would answer; keys do not expire while a script runs.
--
-- GIVEN_NOW: the time the caller gives (for tests), ARGV[1] of both entry scripts, in Unix ms;
-- nil to run on Redis's clock, which its TTLs count on. A given clock need not keep pace with them.
--
-- HELD: true while a consume's writes wait for every policy to admit (see `decide`). They wait
-- in HELD_WRITES, its first HELD_N entries: one table for every decision, since a new table per
-- decision cost 5% of a two-policy decision, counted by callgrind. Entries past HELD_N are stale.
--
-- `begin` sets all three as each call begins, since Redis's function library (see
-- packages/core/scripts/generate-lua.mjs) runs this file once and then serves every call, and a
-- call that failed part-way must leave nothing to the next.
local STATES, GIVEN_NOW, HELD
local HELD_WRITES, HELD_N = {}, 0

-- Begins a call of an entry script: `given` is its ARGV[1], `expiry` the Unix ms by the Redis
-- clock after which its caller no longer waits (nil for none). Returns the Redis clock in Unix
-- ms, the call's now (scripts' ms, see EPOCH_MS) and whether the call arrived past its expiry:
-- its caller has then been answered without it and may send it again, so it must do nothing.
local function begin(given, expiry)
  STATES, GIVEN_NOW, HELD = {}, tonumber(given), nil
  local time = redis.call('TIME')
  local clock = time[1] * 1000 + math.floor(time[2] / 1000)
  -- One clock for every gateway: theirs drift, Redis's is shared.
  return clock, (GIVEN_NOW or clock) - EPOCH_MS, expiry ~= nil and clock > expiry
end

-- What every expiry a script sets adds to the time its state is good for. Redis 7.2 and later
-- time PX and PEXPIRE from the script's start, which can read a millisecond before its TIME: a
-- key gone before its state's time would be read as fresh, and admit what the state refuses.
-- A key that outlives its time is read by the times it holds, which say it is spent.
local EXPIRY_MARGIN_MS = 1

local function read_state(key)
  local state = STATES[key]
  if state == nil then
    state = redis.call('GET', key)
    STATES[key] = state
  end
  return state
end

-- Sets a state that expires in `ms`. `kept` says the key exists and already expires then, as
-- when it counts in the window it is written in: it keeps its expiry, on Redis's clock, since a
-- SET that moves a key's expiry costs Redis about twice one that keeps it. The expiry goes as a
-- string: Redis 7.0 formats a number argument with %.17g, which costs more than '%d' (1% of a
-- one-policy decision in a batch, counted by callgrind).
-- The key lives a millisecond past `ms` (EXPIRY_MARGIN_MS).
local function write_state(key, state, ms, kept)
  if kept and GIVEN_NOW == nil then
    redis.call('SET', key, state, 'KEEPTTL')
  else
    redis.call('SET', key, state, 'PX', string.format('%d', ms + EXPIRY_MARGIN_MS))
  end
  STATES[key] = state
end

-- What an algorithm calls to write a consume: held back in HELD_WRITES while `decide` waits for
-- every policy to admit, written at once otherwise.
local function save_state(key, state, ms, kept)
  if HELD then
    local n = HELD_N
    HELD_WRITES[n + 1], HELD_WRITES[n + 2], HELD_WRITES[n + 3], HELD_WRITES[n + 4] =
      key, state, ms, kept or false
    HELD_N = n + 4
  else
    write_state(key, state, ms, kept)
  end
end

local function drop_state(key)
  redis.call('DEL', key)
  STATES[key] = false
end

-- Decides one request against its `count` policies, whose keys start at KEYS[key] and whose
-- algorithm, limit, window and box quadruples start at ARGV[arg]; a policy with a box (a
-- penalty box of that many ms, else 0) has a second key, after all the policies' keys. Writes
-- OUTCOMES[0], 1 or 0 for the request, then allowed, remaining, reset_ms and retry_ms per
-- policy from OUTCOMES[1] (see `answer`), and returns how many keys it used. `mode` is '1' to
-- consume, '0' to look (a peek), 'p' to take `cost` as a penalty, or 'r<at>' to give back
-- `cost` charged at script time `at`.
-- Several policies consume all-or-nothing, so a rejection anywhere consumes nothing anywhere:
-- each policy decides as if it consumed, its write held back (HELD), and the writes are made
-- only once every policy has admitted; on a rejection the policies that admitted are looked at
-- again for what the reply shows, their state untouched. An algorithm in WRITES_ITSELF cannot
-- hold its writes back, so its policies first all look, then all consume. An identity in a
-- policy's box is refused by it until the box ends; a consume refused by a policy with a box
-- puts the identity in it.
local function decide(key, arg, count, cost, now, mode)
  local outcomes = OUTCOMES
  local boxes = key + count
  if mode ~= '1' and mode ~= '0' then
    local at = tonumber(string.match(mode, '^r(%-?%d+)$'))
    local amount = cost
    if at then amount = -cost end
    outcomes[0] = 1
    for i = 0, count - 1 do
      local a = arg + ARGS_PER_POLICY * i
      local name, k, limit, window = ARGV[a], KEYS[key + i], ARGV[a + 1] + 0, ARGV[a + 2] + 0
      ADJUSTMENTS[name](k, limit, window, amount, now, at)
      local allowed, remaining, reset, retry = ALGORITHMS[name](k, limit, window, 1, now, false)
      if allowed == 0 then outcomes[0] = 0 end
      local o = 1 + FIELDS_PER_POLICY * i
      outcomes[o], outcomes[o + 1], outcomes[o + 2], outcomes[o + 3] =
        allowed, remaining, reset, retry
      if ARGV[a + 3] + 0 > 0 then boxes = boxes + 1 end
    end
    return boxes - key
  end
  local apply = mode == '1'
  local consume = apply and count == 1
  if apply and not consume then
    consume = true
    for i = 0, count - 1 do
      if WRITES_ITSELF[ARGV[arg + ARGS_PER_POLICY * i]] then consume = false end
    end
    if consume then HELD, HELD_N = true, 0 end
  end
  while true do
    outcomes[0] = 1
    local b = key + count
    for i = 0, count - 1 do
      local a = arg + ARGS_PER_POLICY * i
      local box_ms = ARGV[a + 3] + 0
      local box, held = nil, 0
      if box_ms > 0 then
        -- The box holds the time it ends, on the scripts' clock, like every other state.
        box, b = KEYS[b], b + 1
        local ends = tonumber(read_state(box))
        if ends then held = ends - now end
      end
      local allowed, remaining, reset, retry =
        ALGORITHMS[ARGV[a]](KEYS[key + i], ARGV[a + 1] + 0, ARGV[a + 2] + 0, cost, now, consume and held <= 0)
      -- A retry of -1 (a cost over the limit) stays: no wait admits it.
      if held > 0 then
        -- In the box: refused until it ends, and nothing consumed.
        allowed, remaining, reset = 0, 0, math.max(reset, held)
        if retry >= 0 then retry = math.max(retry, held) end
      elseif allowed == 0 and apply and box then
        write_state(box, string.format('%d', now + box_ms), box_ms)
        reset = math.max(reset, box_ms)
        if retry >= 0 then retry = math.max(retry, box_ms) end
      end
      if allowed == 0 then outcomes[0] = 0 end
      local o = 1 + FIELDS_PER_POLICY * i
      outcomes[o], outcomes[o + 1], outcomes[o + 2], outcomes[o + 3] =
        allowed, remaining, reset, retry
    end
    if HELD then
      HELD = nil
      if outcomes[0] == 1 then
        for w = 1, HELD_N, 4 do
          write_state(HELD_WRITES[w], HELD_WRITES[w + 1], HELD_WRITES[w + 2], HELD_WRITES[w + 3])
        end
      else
        -- Refused: what a look shows for each policy that would have admitted. Those refused
        -- decided without consuming, and the box they entered shows in their outcome already.
        for i = 0, count - 1 do
          local o = 1 + FIELDS_PER_POLICY * i
          if outcomes[o] == 1 then
            local a = arg + ARGS_PER_POLICY * i
            outcomes[o], outcomes[o + 1], outcomes[o + 2], outcomes[o + 3] =
              ALGORITHMS[ARGV[a]](KEYS[key + i], ARGV[a + 1] + 0, ARGV[a + 2] + 0, cost, now, false)
          end
        end
      end
      return b - key
    end
    if consume or not apply or outcomes[0] == 0 then return b - key end
    consume = true
  end
end

-- Writes the outcomes of `decide` for `count` policies into `reply` from `n` (see
-- FIELDS_PER_POLICY); returns where the next goes.
local function answer(count, reply, n)
  for o = 1, FIELDS_PER_POLICY * count, FIELDS_PER_POLICY do
    if OUTCOMES[o] == 1 then
      reply[n], reply[n + 1] = OUTCOMES[o + 1], OUTCOMES[o + 2]
      n = n + 2
    else
      reply[n], reply[n + 1], reply[n + 2] = -1 - OUTCOMES[o + 1], OUTCOMES[o + 2], OUTCOMES[o + 3]
      n = n + 3
    end
  end
  return n
end

-- The fixed-point units of the rate algorithms, the twin of scale in src/algorithms/fixed-point.ts:
-- returns `token`, the units a token is worth, `rate`, the units a time step adds, and `step`, in
-- ms. Policies whose limit * window is a safe integer keep token = window, rate = limit and 1 ms
-- steps, the state of earlier versions. Larger ones divide out gcd(limit, window), and if a full
-- bucket (limit * token) still passes 2^53, count time in coarser steps that divide the window
-- into at least 1000. math.fmod is exact where Lua's % rounds.
local function gcd(a, b)
  while b ~= 0 do a, b = b, math.fmod(a, b) end
  return a
end

local function scale(limit, window)
  if limit * window <= 9007199254740991 then return window, limit, 1 end
  for _, step in ipairs({ 1, 10, 100, 1000, 60000 }) do
    local steps = window / step
    if steps == math.floor(steps) and steps >= 1000 then
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
    local step = remainder * 256 + a * math.fmod(math.floor(b / place), 256)
    local digit = math.floor(step / c)
    quotient = quotient * 256 + digit
    remainder = step - digit * c
    place = place / 256
  end
  return quotient
end
