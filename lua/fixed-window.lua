-- Fixed window: a counter per window. Windows are aligned to the epoch, so every key resets at
-- the same moment.
--
-- State: a hash from window index to count, holding the latest window only. Counting is one
-- HINCRBY with no read before it, and a refused request gives its count back. The first count
-- of a window drops the window before it and sets the key to expire when this window ends.

-- Keys written before the hash, "<window_index> <count>" strings, become hashes in place.
local function upgrade(key)
  local stored, count = string.match(redis.call('GET', key) or '', '^(%d+) (%d+)$')
  local ttl = redis.call('PTTL', key)
  redis.call('DEL', key)
  if stored and ttl > 0 then
    redis.call('HSET', key, stored, count)
    redis.call('PEXPIRE', key, ttl)
  end
end

-- redis.call for the first command on the key, which upgrades an old string key if it meets one.
local function on_hash(command, key, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply.err then
    upgrade(key)
    reply = redis.call(command, key, ...)
  end
  return reply
end

-- The latest window the key holds and its count, or `index` and 0. A window later than `index`
-- only appears if the clock stepped back: stay in it rather than forget it.
local function latest_window(key, index)
  local used = 0
  local fields = on_hash('HGETALL', key)
  for i = 1, #fields, 2 do
    local stored = tonumber(fields[i])
    if stored >= index then index, used = stored, tonumber(fields[i + 1]) end
  end
  return index, used, fields
end

local function refused(limit, used, cost, ends_in)
  local retry = -1
  if cost <= limit then retry = ends_in end
  return 0, math.max(0, limit - used), ends_in, retry
end

ALGORITHMS['fixed-window'] = function(key, limit, window, cost, now, apply)
  local absolute = now + EPOCH_MS
  local index = math.floor(absolute / window)

  if not apply then
    local latest, used = latest_window(key, index)
    local ends_in = (latest + 1) * window - absolute
    if used + cost > limit then return refused(limit, used, cost, ends_in) end
    if used == 0 then return 1, limit, 0, 0 end
    return 1, limit - used, ends_in, 0
  end

  local field = string.format('%d', index)
  local used = on_hash('HINCRBY', key, field, cost)
  local first = used == cost
  local fields
  if first then
    -- New to this key: the key may hold an earlier window, or a later one.
    local latest, _
    latest, _, fields = latest_window(key, index)
    if latest > index then
      redis.call('HDEL', key, field)
      index, field, first = latest, string.format('%d', latest), false
      used = redis.call('HINCRBY', key, field, cost)
    end
  end
  local ends_in = (index + 1) * window - absolute
  if used > limit then
    if first then redis.call('HDEL', key, field) else redis.call('HINCRBY', key, field, -cost) end
    return refused(limit, used - cost, cost, ends_in)
  end
  if first then
    for i = 1, #fields, 2 do
      if fields[i] ~= field then redis.call('HDEL', key, fields[i]) end
    end
  end
  if first or CALLER_CLOCK then redis.call('PEXPIRE', key, ends_in) end
  return 1, limit - used, ends_in, 0
end
