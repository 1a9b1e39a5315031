// A plain fetch handler limited per client IP, 10 a minute: what Bun.serve, Deno.serve or a Next.js
// route handler serves. Runs on Node (`tsx fetch.ts`), Bun (`bun fetch.ts`) and Deno (`deno run -A fetch.ts`).
import { decisionOf, withRateLimit } from '@sentinel/fetch';
import { serve } from './serve.ts';

const redisUrl = process.env.REDIS_URL;

// The client IP comes from the runtime: Bun's server.requestIP(request), Deno's info.remoteAddr.
const handler = withRateLimit(
  (request: Request) =>
    Response.json({ hello: 'world', remaining: decisionOf(request)?.remaining }),
  { redisUrl, limit: 10, window: '1m' },
);

const { runtime, port } = await serve(handler, Number(process.env.PORT ?? 3000));
console.log(
  `fetch handler on ${runtime} at http://localhost:${port}, counting ${redisUrl ? 'in Redis' : 'in memory'}`,
);
console.log(`Try: curl -i http://localhost:${port}/`);
