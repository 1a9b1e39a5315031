// Errors thrown downstream of the limiter reach Koa's error handling as thrown, on Koa 3 and 2.
import { setTimeout as sleep } from 'node:timers/promises';
import type Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { type RateLimitOptions, rateLimit } from '../src/index.ts';
import { KOA_VERSIONS, serve } from './apps.ts';
import { closeLater, STORES, storeOptions } from './stores.ts';

/** An error Koa answers with its own status and message. */
function teapot(): Error {
  return Object.assign(new Error('short and stout'), { status: 418, expose: true });
}

describe.each(KOA_VERSIONS)('on %s', (_, KoaApp) => {
  describe.each(STORES)('with the %s store', (store) => {
    /** An app recording its `error` events, with `upstream` before the limiter and `downstream` after. */
    async function start(
      downstream: Koa.Middleware,
      { options = {}, upstream }: { options?: RateLimitOptions; upstream?: Koa.Middleware } = {},
    ) {
      const app = new KoaApp();
      const errors: Array<{ error: unknown; status: number }> = [];
      app.on('error', (error: unknown, ctx: Koa.Context) =>
        errors.push({ error, status: ctx.status }),
      );
      if (upstream) app.use(upstream);
      app.use(
        closeLater(rateLimit({ limit: 5, window: '1m', ...storeOptions(store), ...options })),
      );
      app.use(downstream);
      const { url } = closeLater(await serve(app));
      return { url, errors };
    }

    it("hands an error thrown downstream to the app's error event unchanged, answering its status", async () => {
      const error = teapot();
      const { url, errors } = await start(() => {
        throw error;
      });
      const response = await fetch(url);
      expect(response.status).toBe(418);
      expect(await response.text()).toBe('short and stout');
      expect(errors).toHaveLength(1);
      expect(errors[0]?.error).toBe(error);
      // Koa emits before it answers: the limiter left the status alone for Koa to take from the error.
      expect(errors[0]?.status).toBe(404);
    });

    it('lets error middleware upstream catch the very error, with nothing set on top of it', async () => {
      const error = teapot();
      const caught: Array<{ error: unknown; status: number; body: unknown }> = [];
      const { url, errors } = await start(
        async () => {
          await sleep(2);
          throw error;
        },
        {
          async upstream(ctx, next) {
            try {
              await next();
            } catch (thrown) {
              caught.push({ error: thrown, status: ctx.status, body: ctx.body });
              ctx.status = 502;
              ctx.body = { handled: true };
            }
          },
        },
      );
      const response = await fetch(url);
      expect(response.status).toBe(502);
      expect(await response.json()).toEqual({ handled: true });
      // The limiter's headers were set before next() and stay; it set no status or body after.
      expect(response.headers.get('ratelimit')).toMatch(/^"5-per-1m";r=4;t=\d+$/);
      expect(caught).toEqual([{ error, status: 404, body: undefined }]);
      expect(errors).toHaveLength(0);
    });

    it('propagates a thrown value that is not an Error as is', async () => {
      const thrown = { reason: 'not an Error' };
      const caught: unknown[] = [];
      const { url } = await start(
        () => {
          throw thrown;
        },
        {
          async upstream(ctx, next) {
            try {
              await next();
            } catch (value) {
              caught.push(value);
              ctx.body = 'handled';
            }
          },
        },
      );
      expect((await fetch(url)).status).toBe(200);
      expect(caught).toHaveLength(1);
      expect(caught[0]).toBe(thrown);
    });

    it('propagates errors from requests the limiter skips', async () => {
      const error = teapot();
      const { url, errors } = await start(
        () => {
          throw error;
        },
        { options: { skip: () => true } },
      );
      expect((await fetch(url)).status).toBe(418);
      expect(errors.map((entry) => entry.error)).toEqual([error]);
    });

    it('keeps counting after downstream errors: a failed request still spends its token', async () => {
      const { url, errors } = await start(() => {
        throw teapot();
      });
      const statuses = [];
      for (let i = 0; i < 6; i++) statuses.push((await fetch(url)).status);
      expect(statuses).toEqual([418, 418, 418, 418, 418, 429]);
      expect(errors).toHaveLength(5);
    });
  });
});
