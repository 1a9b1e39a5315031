// Run by Bun and Deno in runtimes.test.ts: ioredis, from the repository's node_modules, sends one
// EVAL to the Redis at argv's URL and prints what came back, with the runtime that ran it.
import process from 'node:process';
import { Redis } from 'ioredis';

const [url, key] = process.argv.slice(2);
if (url === undefined || key === undefined) throw new Error('usage: redis-eval.ts <url> <key>');
const redis = new Redis(url, { maxRetriesPerRequest: 1 });
try {
  const reply = await redis.eval(
    "return { redis.call('INCRBY', KEYS[1], ARGV[1]), ARGV[2] }",
    1,
    key,
    2,
    'from lua',
  );
  const { bun, deno } = process.versions as { bun?: string; deno?: string };
  console.log(JSON.stringify({ bun, deno, reply }));
} finally {
  redis.disconnect();
}
