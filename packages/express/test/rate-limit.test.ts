// rateLimit() on Express 5 and 4, memory and Redis: app and router use, headers, bodies, hooks, errors, trust proxy.
import type { ErrorRequestHandler, Express } from 'express';
import { afterEach, describe, expect, it } from 'vitest';
import { connect, uniquePrefix } from '../../../test/harness/clients.ts';
import { QUOTA_EXCEEDED } from '../../core/src/index.ts';
import {
  byApiKey,
  type Decision,
  type RateLimitMiddleware,
  type RateLimitOptions,
  rateLimit,
} from '../src/index.ts';
import { answer, EXPRESS_VERSIONS, type ExpressVersion, startApp } from './apps.ts';

const STORES = ['memory', 'redis'] as const;

let redis: ReturnType<typeof connect> | undefined;
/** One Redis client for the file, opened on first use. */
function redisClient(): ReturnType<typeof connect> {
  if (redis === undefined) redis = connect();
  return redis;
}
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

interface Reply {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: response bodies are checked field by field
  body: any;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Reply> {
  const response = await fetch(url, { headers });
  const text = await response.text();
  const json = response.headers.get('content-type')?.includes('json');
  return {
    status: response.status,
    headers: response.headers,
    text,
    body: json ? JSON.parse(text) : text,
  };
}

async function statuses(url: string, times: number, headers: Record<string, string> = {}) {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) seen.push((await get(url, headers)).status);
  return seen;
}

describe.each(EXPRESS_VERSIONS)('on $name', (version: ExpressVersion) => {
  describe.each(STORES)('with the %s store', (store) => {
    /** A middleware on this store, 2 per minute unless told otherwise, under a prefix of its own. */
    function limit(options: Partial<RateLimitOptions> = {}): RateLimitMiddleware {
      const shared = store === 'memory' ? {} : { redis: redisClient() };
      const middleware = rateLimit({
        limit: 2,
        window: '1m',
        prefix: uniquePrefix('express'),
        ...shared,
        ...options,
      } as RateLimitOptions);
      cleanups.push(() => middleware.close());
      return middleware;
    }

    const start = (build: (app: Express) => void) => startApp(version, build, cleanups);

    it('limits every route of the app when used with app.use', async () => {
      const url = await start((app) => {
        app.use(limit());
        app.get('/', answer);
        app.get('/other', answer);
      });
      expect((await get(`${url}/`)).status).toBe(200);
      expect((await get(`${url}/other`)).status).toBe(200);
      expect((await get(`${url}/`)).status).toBe(429);
      expect((await get(`${url}/other`)).status).toBe(429);
    });

    it('limits only the router route it is given', async () => {
      const url = await start((app) => {
        const router = version.router();
        router.get('/limited', limit({ limit: 1 }), answer);
        router.get('/open', answer);
        app.use('/api', router);
      });
      expect(await statuses(`${url}/api/limited`, 2)).toEqual([200, 429]);
      const open = await get(`${url}/api/open`);
      expect(await statuses(`${url}/api/open`, 3)).toEqual([200, 200, 200]);
      expect(open.body.rateLimit).toBeNull();
      expect(open.headers.get('ratelimit')).toBeNull();
    });

    it('makes routes limited by separate middlewares of one group share a budget', async () => {
      const prefix = uniquePrefix('express');
      const url = await start((app) => {
        app.get('/search/a', limit({ prefix, group: 'search' }), answer);
        app.get('/search/b', limit({ prefix, group: 'search' }), answer);
        app.get('/export', limit({ prefix, group: 'export' }), answer);
      });
      const paths = ['/search/a', '/search/b', '/search/a', '/export'];
      const seen: number[] = [];
      for (const path of paths) seen.push((await get(`${url}${path}`)).status);
      expect(seen).toEqual([200, 200, 429, 200]);
    });

    it('exposes the decision to route handlers as req.rateLimit', async () => {
      const url = await start((app) => {
        app.get('/', limit({ limit: 5 }), answer);
      });
      const first = await get(`${url}/`);
      expect(first.body.rateLimit).toMatchObject({
        allowed: true,
        limit: 5,
        remaining: 4,
        policy: '5-per-1m',
      });
      expect((await get(`${url}/`)).body.rateLimit.remaining).toBe(3);
    });

    it('sets the RateLimit headers on success, and Retry-After as well on a 429', async () => {
      const url = await start((app) => {
        app.get('/', limit(), answer);
      });
      const admitted = await get(`${url}/`);
      const decision: Decision = admitted.body.rateLimit;
      expect(admitted.headers.get('ratelimit-policy')).toBe('"2-per-1m";q=2;w=60');
      expect(admitted.headers.get('ratelimit')).toBe(
        `"2-per-1m";r=1;t=${Math.ceil(decision.resetMs / 1000)}`,
      );
      expect(admitted.headers.get('retry-after')).toBeNull();
      await get(`${url}/`);
      const refused = await get(`${url}/`);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('ratelimit-policy')).toBe('"2-per-1m";q=2;w=60');
      expect(refused.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=0;t=\d+$/);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60).toBe(true);
    });

    it('answers a 429 with an application/problem+json body naming the policy', async () => {
      const url = await start((app) => {
        app.get('/', limit({ limit: 1 }), answer);
      });
      await get(`${url}/`);
      const refused = await get(`${url}/`);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('content-type')).toBe('application/problem+json');
      expect(Number(refused.headers.get('content-length'))).toBe(Buffer.byteLength(refused.text));
      expect(refused.body).toEqual({
        type: QUOTA_EXCEEDED,
        title: 'Too Many Requests',
        status: 429,
        detail: `Quota exceeded for 1-per-1m; retry in ${refused.headers.get('retry-after')} s.`,
        'violated-policies': ['1-per-1m'],
      });
    });

    it('answers an API key the lookup rejects with a 401 problem, even beside a handler', async () => {
      let handled = 0;
      const url = await start((app) => {
        const identify = byApiKey({ lookup: () => null, unknownKey: 'reject' });
        const handler = (_req: unknown, res: { sendStatus(status: number): unknown }) => {
          handled++;
          res.sendStatus(418);
        };
        app.get('/', limit({ identify, handler }), answer);
      });
      const refused = await get(`${url}/`, { 'x-api-key': 'nobody-issued-this' });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('content-type')).toBe('application/problem+json');
      expect(refused.body).toMatchObject({ status: 401, title: 'Unauthorized' });
      expect(handled).toBe(0);
    });

    it('lets the handler option replace the refusal, with the headers already set', async () => {
      const seen: Array<{ decision: Decision; exposed: Decision | undefined }> = [];
      const url = await start((app) => {
        const middleware = limit({
          limit: 1,
          handler(req, res, _next, decision) {
            seen.push({ decision, exposed: req.rateLimit });
            const statusBefore = res.statusCode;
            res.status(418).json({
              custom: true,
              policy: decision.policy,
              statusBefore,
              retryAfterSet: res.getHeader('Retry-After') !== undefined,
            });
          },
        });
        app.get('/', middleware, answer);
      });
      await get(`${url}/`);
      const refused = await get(`${url}/`);
      expect(refused.status).toBe(418);
      expect(refused.body).toEqual({
        custom: true,
        policy: '1-per-1m',
        statusBefore: 429,
        retryAfterSet: true,
      });
      expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
      expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(refused.headers.get('ratelimit')).toMatch(/^"1-per-1m";r=0;t=\d+$/);
      expect(seen).toHaveLength(1);
      expect(seen[0]?.decision).toMatchObject({ allowed: false, policy: '1-per-1m' });
      expect(seen[0]?.exposed).toBe(seen[0]?.decision);
    });

    it('hands the handler the refusal status, so answering without one keeps the 429', async () => {
      const url = await start((app) => {
        app.get(
          '/',
          limit({
            limit: 1,
            handler: (_req, res) => {
              res.send('slow down');
            },
          }),
          answer,
        );
      });
      await get(`${url}/`);
      const refused = await get(`${url}/`);
      expect([refused.status, refused.text]).toEqual([429, 'slow down']);
    });

    it('leaves requests that skip matches alone, without spending the budget', async () => {
      const url = await start((app) => {
        app.use(limit({ limit: 1, skip: (req) => req.get('x-internal') === 'yes' }));
        app.get('/', answer);
      });
      for (let i = 0; i < 3; i++) {
        const skipped = await get(`${url}/`, { 'x-internal': 'yes' });
        expect(skipped.status).toBe(200);
        expect(skipped.body.rateLimit).toBeNull();
        expect(skipped.headers.get('ratelimit')).toBeNull();
      }
      expect(await statuses(`${url}/`, 2)).toEqual([200, 429]);
    });

    it('passes an error raised downstream to the error handler unchanged, once', async () => {
      const boom = new Error('boom');
      const caught: unknown[] = [];
      const url = await start((app) => {
        app.use(limit({ limit: 10 }));
        app.get('/throw', () => {
          throw boom;
        });
        app.get('/next', (_req, _res, next) => next(boom));
        const onError: ErrorRequestHandler = (error, _req, res, _next) => {
          caught.push(error);
          res.status(500).json({ message: (error as Error).message });
        };
        app.use(onError);
      });
      for (const path of ['/throw', '/next']) {
        const failed = await get(`${url}${path}`);
        expect([failed.status, failed.body]).toEqual([500, { message: 'boom' }]);
        expect(failed.headers.get('ratelimit')).toMatch(/^"10-per-1m";r=\d;t=\d+$/);
      }
      expect(caught).toHaveLength(2);
      expect(caught.every((error) => error === boom)).toBe(true);
    });

    it('still answers 429 when its onLimited callback throws, reporting it to onError', async () => {
      const failure = new Error('onLimited failed');
      const reported: unknown[] = [];
      const caught: unknown[] = [];
      const url = await start((app) => {
        app.use(
          limit({
            limit: 1,
            onLimited: () => {
              throw failure;
            },
            onError: (error) => reported.push(error),
          }),
        );
        app.get('/', answer);
        app.use(((error, _req, res, _next) => {
          caught.push(error);
          res.status(500).end();
        }) satisfies ErrorRequestHandler);
      });
      expect(await statuses(`${url}/`, 2)).toEqual([200, 429]);
      expect(reported).toEqual([failure]);
      expect(caught).toEqual([]);
    });

    it('counts clients by X-Forwarded-For when the app trusts the proxy', async () => {
      const url = await start((app) => {
        app.set('trust proxy', true);
        app.use(limit({ limit: 1 }));
        app.get('/', answer);
      });
      const from = (ip: string) => ({ 'x-forwarded-for': ip });
      expect(await statuses(`${url}/`, 2, from('203.0.113.7'))).toEqual([200, 429]);
      expect(await statuses(`${url}/`, 2, from('203.0.113.8'))).toEqual([200, 429]);
    });

    it('ignores X-Forwarded-For when the app does not trust the proxy', async () => {
      const url = await start((app) => {
        app.set('trust proxy', false);
        app.use(limit({ limit: 1 }));
        app.get('/', answer);
      });
      expect((await get(`${url}/`, { 'x-forwarded-for': '203.0.113.7' })).status).toBe(200);
      expect((await get(`${url}/`, { 'x-forwarded-for': '203.0.113.8' })).status).toBe(429);
    });

    it('never answers hostile header values with a 5xx', async () => {
      const url = await start((app) => {
        app.set('trust proxy', true);
        app.use(limit({ limit: 100 }));
        app.get('/', answer);
      });
      // fetch sends header values as bytes: a latin1 string carries raw UTF-8.
      const utf8 = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
      const hostile: Array<Record<string, string>> = [
        { 'x-api-key': 'k'.repeat(16_000) },
        { 'x-api-key': '{tag}}{{' },
        { 'x-api-key': utf8('ключ-🔑-{}') },
        { authorization: 'Bearer ' },
        { authorization: `Bearer ${'x'.repeat(5_000)}` },
        { 'x-forwarded-for': 'not-an-ip, ::ffff:zz, 999.1.1.1' },
        { 'x-forwarded-for': utf8('🔑, {a}') },
        { 'x-forwarded-for': '2001:db8::1%eth0' },
      ];
      for (const headers of hostile) {
        const reply = await get(`${url}/`, headers);
        expect(reply.status, JSON.stringify(headers).slice(0, 80)).toBe(200);
      }
    });
  });
});

describe('construction', () => {
  it('builds a named middleware that exposes its limiter and closes it', async () => {
    const middleware = rateLimit({ limit: 1, window: '1m' });
    expect(middleware.name).toBe('sentinelRateLimit');
    expect((await middleware.limiter.consume('a')).allowed).toBe(true);
    expect((await middleware.limiter.consume('a')).allowed).toBe(false);
    await expect(middleware.close()).resolves.toBeUndefined();
  });

  it('throws a TypeError for a handler that is not a function', () => {
    expect(() => rateLimit({ limit: 1, window: '1m', handler: 'no' as never })).toThrow(TypeError);
  });

  it('throws a TypeError for missing options or policies', () => {
    expect(() => rateLimit(undefined as never)).toThrow(TypeError);
    expect(() => rateLimit({})).toThrow(TypeError);
    expect(() => rateLimit({ limit: 1, window: '1m', headers: 'draft-99' as never })).toThrow(
      TypeError,
    );
  });
});
