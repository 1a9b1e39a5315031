// The Nest app under load, on Express or Fastify: compiled by tsc with decorator metadata from
// `nest/`, as `nest build` compiles a Nest app, then served with the bench's limits and floor.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { NestAppModule, NestPlatform, NestVariant } from './nest/contract.ts';
import { createFloor, type Floor } from './redis-clients.ts';
import { countFailure } from './sentinel-options.ts';
import { API_KEY_HEADER, HUGE_LIMIT, type Running, type Variant, WINDOW_MS } from './variants.ts';

const NEST_DIR = fileURLToPath(new URL('nest/', import.meta.url));
const COMPILED = new URL('nest/dist/app.js', import.meta.url);

/** Runs `tsc --build` on the Nest app, which type-checks it too: incremental, so quick when nothing changed. */
export function compileNestApp(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '--build', NEST_DIR], { stdio: 'inherit' });
}

const NEST_VARIANTS: readonly Variant[] = [
  'bare',
  'floor',
  'sentinel-own-client',
  '@nestjs/throttler',
] satisfies NestVariant[];

/** Serves the compiled app on `platform`, as `server.ts` serves every framework's variants. */
export function serveNestOn(platform: NestPlatform) {
  return async function serveNest(variant: Variant, redisUrl: string): Promise<Running> {
    if (!NEST_VARIANTS.includes(variant)) throw new TypeError(`Nest has no variant ${variant}`);
    if (!existsSync(COMPILED)) {
      throw new Error(`${fileURLToPath(COMPILED)} is missing: the HTTP suite compiles it first`);
    }
    const app = (await import(COMPILED.href)) as NestAppModule;
    const floor: Floor | undefined = variant === 'floor' ? await createFloor(redisUrl) : undefined;
    const running = await app.serveNest(platform, variant as NestVariant, {
      redisUrl,
      limit: HUGE_LIMIT,
      windowMs: WINDOW_MS,
      apiKeyHeader: API_KEY_HEADER,
      onError: countFailure,
      ...(floor && { floor }),
    });
    return {
      port: running.port,
      async close() {
        await running.close();
        await floor?.close();
      },
    };
  };
}
