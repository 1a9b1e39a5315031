// The limiter Sentinel replaces: read the bucket, decide in JavaScript, write it back.
// It exists only to show the overshoot a race causes: the demo's first row, and the tests' proof
// that they would see one.
import type { Redis } from 'ioredis';

export function naiveTokenBucket(client: Redis, limit: number, windowMs: number) {
  return async function consume(key: string): Promise<boolean> {
    const now = Date.now();
    const [tokens, lastRefill] = await client.hmget(key, 'tokens', 'last_refill');
    let available = tokens === null ? limit : Number(tokens);
    const last = lastRefill === null ? now : Number(lastRefill);
    const earned = Math.floor(((now - last) * limit) / windowMs);
    available = Math.min(limit, available + earned);
    if (available < 1) return false;
    await client.hset(key, 'tokens', available - 1, 'last_refill', earned > 0 ? now : last);
    return true;
  };
}
