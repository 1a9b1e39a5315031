-- `decide`: one request against all its policies, all-or-nothing, with penalty boxes, penalties
-- and refunds. Shared by both entry scripts, whatever mix of algorithms the policies use.

-- Decides one request against its `count` policies, whose keys start at KEYS[key] and whose
-- algorithm, limit, window and box quadruples start at ARGV[arg]; a policy with a box (a
-- penalty box of that many ms, else 0) has a second key, after all the policies' keys. Writes
-- OUTCOMES[0], 1 or 0 for the request, then allowed, remaining, reset_ms and retry_ms per
-- policy from OUTCOMES[1] (see `answer`), and returns how many keys it used. `mode` is '1' to
-- consume, '0' to look (a peek), 'p' to take `cost` as a penalty, 'r<at>' to give back
-- `cost` charged at script time `at`, 'x<at>' to give back the slots taken then of the policies
-- that hold leases (a release, see LEASES), 'n<at>' to renew those leases from now, or
-- 'q<at>:<ends>:<id>' to end the quota lease `id` taken at `at`, giving back `cost` unused units
-- (see QUOTA_RETURNS; a lease is taken by `take_quota_lease`).
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
    local kind, at, ends, id
    if string_byte(mode) == 113 then
      kind, at, ends, id = 'q', string_match(mode, '^q(%-?%d+):(%-?%d+):(%w+)$')
      ends = tonumber(ends)
    else
      kind, at = string_match(mode, '^([rxn])(%-?%d+)$')
    end
    at = tonumber(at)
    local amount = cost
    if at then amount = -cost end
    outcomes[0] = 1
    for i = 0, count - 1 do
      local a = arg + ARGS_PER_POLICY * i
      local name, k, limit, window = ARGV[a], KEYS[key + i], ARGV[a + 1] + 0, ARGV[a + 2] + 0
      local lease, renewed = LEASES[name], 1
      -- A release gives back the slots of the policies that hold leases, and only those; a
      -- refund or a penalty is the rate policies' alone, so a slot is never given back twice.
      if kind == 'q' then
        local give = QUOTA_RETURNS[name]
        if give then give(k, limit, window, cost, now, at, ends, id) end
      elseif kind == 'n' then
        if lease then renewed = lease(k, limit, window, cost, now, at) end
      elseif (kind == 'x') == (lease ~= nil) then
        local given = ADJUSTMENTS[name](k, limit, window, amount, now, at)
        if kind == 'x' and given < cost then renewed = 0 end
      end
      -- A renewal or a release answers only whether each lease was still held (neither finds the
      -- slots of one that ended), so it reads no policy for its reply; the rest answer a look.
      local allowed, remaining, reset, retry = renewed, 0, 0, 0
      if kind ~= 'n' and kind ~= 'x' then
        allowed, remaining, reset, retry = ALGORITHMS[name](k, limit, window, 1, now, false)
      end
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
        allowed, remaining, reset = 0, 0, math_max(reset, held)
        if retry >= 0 then retry = math_max(retry, held) end
      elseif allowed == 0 and apply and box then
        write_state(box, string_format('%d', now + box_ms), box_ms)
        reset = math_max(reset, box_ms)
        if retry >= 0 then retry = math_max(retry, box_ms) end
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
          local key, state, ms, kept = HELD_WRITES[w], HELD_WRITES[w + 1], HELD_WRITES[w + 2], HELD_WRITES[w + 3]
          -- A write an algorithm makes with commands of its own waits as its function.
          if type(state) == 'function' then state(key, ms, kept, now) else write_state(key, state, ms, kept) end
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

-- Takes a quota lease beside a consume of `cost`, for mode 'l<units>:<ms>:<id>': the consume and
-- `units` more, all-or-nothing, if every policy would admit them all now, as one consume of
-- their sum; otherwise the consume alone, decided as mode '1' decides it. The look first keeps a
-- lease that does not fit from putting the identity in a penalty box. Returns the units leased,
-- 0 for none, and the ms until the lease ends: `ms`, or sooner where a policy ends it sooner.
local function take_quota_lease(key, arg, count, cost, now, mode)
  local units, ms, id = string_match(mode, '^l(%d+):(%d+):(%w+)$')
  units = units + 0
  decide(key, arg, count, cost + units, now, '0')
  if OUTCOMES[0] == 1 then
    local lease = { id, units, now + ms }
    QUOTA = lease
    decide(key, arg, count, cost + units, now, '1')
    QUOTA = nil
    if OUTCOMES[0] == 1 then return units, lease[3] - now end
  end
  decide(key, arg, count, cost, now, '1')
  return 0, 0
end
