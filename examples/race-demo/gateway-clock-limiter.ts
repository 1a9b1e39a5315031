// Limiters that run atomically in Redis yet take the time from the gateway, as the original
// design's script did. They exist only for the clock-skew comparison: the demo's proof, and the
// tests', that skewed gateway clocks would show. Sentinel's scripts read Redis's TIME instead.
import type { Redis } from 'ioredis';

/** The original design's token bucket, as its write-up gives it: ARGV[3] is the gateway's time. */
const TOKEN_BUCKET = `
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

/** A fixed window whose number the gateway picks by its clock; KEYS[1] names that window. */
const FIXED_WINDOW = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if count > tonumber(ARGV[1]) then return 0 end
return 1
`;

export const GATEWAY_CLOCK_ALGORITHMS = ['token-bucket', 'fixed-window'] as const;
export type GatewayClockAlgorithm = (typeof GATEWAY_CLOCK_ALGORITHMS)[number];

/** Each algorithm's consume on `client`: true when admitted, by this process's Date.now(). */
export function gatewayClockLimiters(
  client: Redis,
  limit: number,
  windowMs: number,
): Record<GatewayClockAlgorithm, (key: string) => Promise<boolean>> {
  return {
    'token-bucket': async (key) => {
      const seconds = Math.floor(Date.now() / 1000);
      const windowSeconds = Math.ceil(windowMs / 1000);
      return (await client.eval(TOKEN_BUCKET, 1, key, limit, windowSeconds, seconds)) === 1;
    },
    'fixed-window': async (key) => {
      const window = Math.floor(Date.now() / windowMs);
      return (await client.eval(FIXED_WINDOW, 1, `${key}:${window}`, limit, windowMs)) === 1;
    },
  };
}
