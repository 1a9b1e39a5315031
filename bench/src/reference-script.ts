// The original design's token bucket, as its write-up gives it: the reference every figure is
// set against. It reads the gateway's clock from ARGV; WITH_TIME is the same script on Redis's
// clock, the fair comparison for Sentinel, which always takes Redis's.
export const REFERENCE_SCRIPT = `
local key = KEYS[1]
local max_tokens = tonumber(ARGV[1])
local window_seconds = tonumber(ARGV[2])
local current_time = tonumber(ARGV[3])

local data = redis.call('HMGET', key, 'tokens', 'last_refill')
local tokens = tonumber(data[1] or max_tokens)
local last_refill = tonumber(data[2] or current_time)

local elapsed = current_time - last_refill
if elapsed > 0 then
  local refill_rate = max_tokens / window_seconds
  local new_tokens = math.floor(elapsed * refill_rate)
  if new_tokens > 0 then
    tokens = math.min(max_tokens, tokens + new_tokens)
    last_refill = last_refill + (new_tokens / refill_rate)
  end
end

if tokens >= 1 then
  tokens = tokens - 1
  redis.call('HMSET', key, 'tokens', tokens, 'last_refill', last_refill)
  redis.call('EXPIRE', key, window_seconds)
  return 1
end

redis.call('HMSET', key, 'tokens', tokens, 'last_refill', last_refill)
redis.call('EXPIRE', key, window_seconds)
return 0
`;

/** The reference on Redis's clock: ARGV[3] is ignored and TIME is read instead. */
export const REFERENCE_SCRIPT_WITH_TIME = REFERENCE_SCRIPT.replace(
  'local current_time = tonumber(ARGV[3])',
  "local t = redis.call('TIME')\nlocal current_time = tonumber(t[1]) + tonumber(t[2]) / 1000000",
);

/**
 * The least any limiter on Redis's clock must do per decision: read the clock, read one key,
 * write it back with an expiry.
 */
export const FLOOR_SCRIPT = `
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], t[1], 'PX', 60000)
return 1
`;

/**
 * The least a token bucket on Redis's clock costs when it answers what rate-limit headers need:
 * Sentinel's token-bucket arithmetic for one policy (level and refill time in one string, the
 * refill kept exact) with nothing else: no batching, modes, penalty box, large-quota scaling or
 * expiry against late calls. ARGV: limit, window in ms. Returns allowed, remaining, ms until
 * full, ms until a retry may pass, and the clock. It shows how near to the floor any such script
 * can come.
 */
export const MINIMAL_TOKEN_BUCKET_SCRIPT = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local capacity = limit * window
local level, updated = capacity, now
local state = redis.call('GET', KEYS[1])
if state then
  local stored, at = string.match(state, '^(%d+) (%d+)$')
  at = tonumber(at)
  updated = math.max(now, at)
  level = math.min(capacity, tonumber(stored) + (updated - at) * limit)
end
if level < window then
  return { 0, 0, math.ceil((capacity - level) / limit), math.ceil((window - level) / limit), now }
end
level = level - window
local full = math.ceil((capacity - level) / limit)
redis.call('SET', KEYS[1], string.format('%d %d', level, updated), 'PX', full)
return { 1, math.floor(level / window), full, 0, now }
`;
