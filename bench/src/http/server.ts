// One server under load, in a process of its own:
//   node --import tsx --import ./src/lib/published-sentinel.mjs src/http/server.ts <framework> <variant> <redis-url>
//   bun --preload ./src/lib/published-sentinel-bun.mjs src/http/server.ts hono <variant> <redis-url>
// The Nest frameworks serve the app the suite compiled into src/http/nest/dist (see nest-app.ts),
// with `--import tsx/esm` in place of `--import tsx` (see server-process.ts).
// It prints `listening <port>` once it accepts connections; on SIGTERM or SIGINT it prints
// `failures <n>`, the failures Sentinel reported, and closes.
import { sentinelFailures } from './sentinel-options.ts';
import {
  FRAMEWORKS,
  type Framework,
  LEASE_VARIANTS,
  type Running,
  type Variant,
  variantsOf,
} from './variants.ts';

type Serve = (variant: Variant, redisUrl: string) => Promise<Running>;

// Imported on demand: loading only one framework keeps each of the suite's many starts short.
const SERVE: Record<Framework, () => Promise<Serve>> = {
  express: async () => (await import('./express-app.ts')).serveExpress,
  koa: async () => (await import('./koa-app.ts')).serveKoa,
  fastify: async () => (await import('./fastify-app.ts')).serveFastify,
  hono: async () => {
    const app = await import('./hono-app.ts');
    return process.versions.bun ? app.serveHonoOnBun : app.serveHono;
  },
  'nest-express': async () => (await import('./nest-app.ts')).serveNestOn('express'),
  'nest-fastify': async () => (await import('./nest-app.ts')).serveNestOn('fastify'),
};

const [framework, variant, redisUrl] = process.argv.slice(2) as [Framework, Variant, string];
// The quota-lease suite's variants are Express's, Koa's and Fastify's.
const leaseVariant =
  ['express', 'koa', 'fastify'].includes(framework) &&
  (LEASE_VARIANTS as readonly Variant[]).includes(variant);
const known = variantsOf(framework).includes(variant) || leaseVariant;
if (!FRAMEWORKS.includes(framework) || !known || !redisUrl) {
  console.error(`usage: server.ts <${FRAMEWORKS.join('|')}> <variant> <redis-url>`);
  process.exit(2);
}

const serve = await SERVE[framework]();
const running = await serve(variant, redisUrl);
console.log(`listening ${running.port}`);

async function shutdown(): Promise<void> {
  console.log(`failures ${sentinelFailures()}`);
  // A close that hangs must not keep the bench waiting; exiting writes a --cpu-prof profile too.
  const deadline = setTimeout(() => process.exit(1), 2_000);
  await running.close();
  clearTimeout(deadline);
  process.exit(0);
}
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
