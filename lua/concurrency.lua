-- Concurrency: at most `limit` slots held at once, each from its request's admission until it
-- is released or its lease (`window` ms) ends. A lease that is never released (its process was
-- killed) lapses at its end, so a crash cannot hold a slot for ever.
--
-- State: a sorted set of slots, scored by the time their lease ends, named "<at>:<n>" where `at`
-- is the time it was taken (or last renewed) and n numbers the slots taken then, from 1. Slots
-- taken at one time end together and are alike, so a release of `cost` slots taken at `at`
-- removes the last `cost` of them, whichever request took each: no lease id needs sending.

-- Takes `cost` slots at `now`, ending `lease` ms later, behind those already taken then.
local function take_slots(key, lease, cost, now)
  local ends = now + lease
  local taken = redis.call('ZCOUNT', key, ends, ends)
  local batch = {}
  for i = 1, cost do
    batch[#batch + 1] = ends
    batch[#batch + 1] = string_format('%d:%d', now, taken + i)
    if #batch == 1000 or i == cost then
      redis.call('ZADD', key, unpack(batch))
      batch = {}
    end
  end
  -- The key lives as long as its last lease; an earlier end never shortens it.
  if redis.call('PTTL', key) < lease + EXPIRY_MARGIN_MS then
    redis.call('PEXPIRE', key, lease + EXPIRY_MARGIN_MS)
  end
end

-- Gives back up to `cost` slots taken at `at`; returns how many it found.
local function give_slots(key, lease, cost, at)
  local taken = redis.call('ZCOUNT', key, at + lease, at + lease)
  local given = math_min(cost, taken)
  local batch = {}
  for i = taken - given + 1, taken do
    batch[#batch + 1] = string_format('%d:%d', at, i)
    if #batch == 1000 or i == taken then
      redis.call('ZREM', key, unpack(batch))
      batch = {}
    end
  end
  return given
end

-- Reset: until the last slot held now ends at the latest. Retry: until enough slots are certain
-- to be free, when the leases in their way end; they are usually released sooner.
ALGORITHMS['concurrency'] = function(key, limit, lease, cost, now, apply)
  -- Leases past their end were never released: their slots are free again.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local held = redis.call('ZCARD', key)
  local reset = 0
  if held > 0 then reset = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2] - now end
  if held + cost <= limit then
    if not apply then return 1, limit - held, reset, 0 end
    if HELD then
      -- Beside other policies, the slots are taken once they all admit (see `decide`).
      local n = HELD_N
      HELD_WRITES[n + 1], HELD_WRITES[n + 2], HELD_WRITES[n + 3], HELD_WRITES[n + 4] =
        key, take_slots, lease, cost
      HELD_N = n + 4
    else
      take_slots(key, lease, cost, now)
    end
    return 1, limit - held - cost, math_max(reset, lease), 0
  end
  if cost > limit then return 0, math_max(0, limit - held), reset, -1 end
  local blocking = redis.call('ZRANGE', key, held + cost - limit - 1, held + cost - limit - 1, 'WITHSCORES')
  return 0, math_max(0, limit - held), reset, blocking[2] - now
end

-- A release gives back the slots taken at `at` (`decide` sends it nothing else); returns how
-- many it found, fewer once their lease has ended.
ADJUSTMENTS['concurrency'] = function(key, limit, lease, amount, now, at)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  return give_slots(key, lease, -amount, at)
end

LEASES['concurrency'] = function(key, limit, lease, cost, now, at)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if give_slots(key, lease, cost, at) < cost then return 0 end
  take_slots(key, lease, cost, now)
  return 1
end
