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
