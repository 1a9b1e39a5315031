// withRateLimit called as a runtime calls a fetch API handler, with memory and Redis: decisionOf, the client address, handler, immutable responses, refunds by outcome.
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { closeServer, listen } from '../../../test/adapters/server.ts';
import { waitFor } from '../../../test/harness/wait-for.ts';
import { serve } from '../../hono/test/apps.ts';
import { expressIps, sendEach, TRUST_SETTINGS } from '../../hono/test/express-ip.ts';
import { closeLater, STORES, storeOptions } from '../../hono/test/stores.ts';
import {
  type Decision,
  decisionOf,
  type FetchHandler,
  SentinelError,
  type WithRateLimitOptions,
  withRateLimit,
} from '../src/index.ts';

/** A request to the app, as a runtime hands it to the handler. */
const request = (path = '/', headers: Record<string, string> = {}) =>
  new Request(`http://app.test${path}`, { headers });

/** What Deno passes beside a request: its `info`, with the connection's address. */
const denoInfo = (hostname: string) => ({ remoteAddr: { transport: 'tcp', hostname, port: 4711 } });

/** What Bun passes beside a request: its server, which knows each request's address. */
const bunServer = (address: string) => ({
  requestIP: (_request: Request) => ({ address, family: 'IPv4', port: 4711 }),
});

/** The statuses of `times` calls, one after another, each response's body read to its end. */
async function statuses(call: () => Promise<Response>, times: number): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < times; i++) {
    const response = await call();
    await response.arrayBuffer();
    seen.push(response.status);
  }
  return seen;
}

/** What every handler answers: the decision it was passed on with, or null. */
const answer: FetchHandler = (req) => Response.json({ rateLimit: decisionOf(req) ?? null });

describe('withRateLimit', () => {
  const ok = () => new Response('ok');

  it.each([
    ['the handler', () => withRateLimit('teapot' as never, { limit: 1, window: '1m' })],
    ['clientIp', () => withRateLimit(ok, { limit: 1, window: '1m', clientIp: '1.2.3.4' as never })],
    ['trustProxy', () => withRateLimit(ok, { limit: 1, window: '1m', trustProxy: -1 })],
    ['trustProxy', () => withRateLimit(ok, { limit: 1, window: '1m', trustProxy: 'gateway' })],
    ['handler', () => withRateLimit(ok, { limit: 1, window: '1m', handler: 418 as never })],
  ])('throws a TypeError at construction naming %s', (name, build) => {
    expect(build).toThrow(TypeError);
    const named = name === 'the handler' ? 'withRateLimit(handler)' : name;
    expect(build).toThrow(`\`${named}\``);
  });

  it('returns a named async handler that exposes its limiter', async () => {
    const handler = closeLater(withRateLimit(ok, { limit: 1, window: '1m' }));
    expect(handler.name).toBe('sentinelRateLimit');
    expect(handler.constructor.name).toBe('AsyncFunction');
    expect(typeof handler.limiter.peek).toBe('function');
  });

  it('has no decision for a request it never saw', () => {
    expect(decisionOf(request())).toBeUndefined();
  });
});

describe('trustProxy', () => {
  it.each(TRUST_SETTINGS)(
    'gives the options the client address Express 5 gives as req.ip, set to %o',
    async (trust) => {
      const seen: unknown[] = [];
      const limited = closeLater(
        withRateLimit(() => Response.json(null), {
          limit: 1000,
          window: '1m',
          trustProxy: trust,
          identify: (req) => {
            seen.push(req.ip);
            return { key: 'everyone' };
          },
        }),
      );
      // On @hono/node-server, whose bindings beside each request give the connection's address.
      await sendEach(closeLater(await serve(limited)).url);
      expect(seen).toEqual(await expressIps(trust));
    },
  );
});

describe.each(STORES)('with the %s store', (store) => {
  /** `handler` wrapped with 2 a minute on this store, closed after the test. */
  const wrap = <Args extends unknown[]>(
    handler: FetchHandler<Args>,
    options: WithRateLimitOptions<Args> = {},
  ) =>
    closeLater(
      withRateLimit(handler, {
        limit: 2,
        window: '1m',
        ...storeOptions(store, 'fetch'),
        ...options,
      }),
    );

  it('passes the decision on as decisionOf(request), and answers the refusal itself', async () => {
    let reached = 0;
    const limited = wrap((req: Request, _info: unknown) => {
      reached++;
      return answer(req);
    });
    const info = denoInfo('203.0.113.7');
    const first = await limited(request(), info);
    expect(first.headers.get('ratelimit-policy')).toBe('"2-per-1m";q=2;w=60');
    expect(first.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=1;t=\d+$/);
    expect(await first.json()).toMatchObject({ rateLimit: { allowed: true, remaining: 1 } });
    const second = (await (await limited(request(), info)).json()) as { rateLimit: Decision };
    expect(second.rateLimit).toMatchObject({ allowed: true, remaining: 0, policy: '2-per-1m' });
    const refused = await limited(request(), info);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(await refused.json()).toMatchObject({ status: 429, 'violated-policies': ['2-per-1m'] });
    expect(reached).toBe(2);
  });

  it('has no decision for a skipped request, and spends nothing on it', async () => {
    const limited = wrap(answer, { skip: (req) => req.request.url.endsWith('/health') });
    const info = denoInfo('203.0.113.7');
    for (let i = 0; i < 3; i++) {
      const response = await limited(request('/health'), info);
      expect(response.headers.get('ratelimit')).toBeNull();
      expect(await response.json()).toEqual({ rateLimit: null });
    }
    expect((await limited.limiter.peek('ip:203.0.113.7')).remaining).toBe(2);
  });

  it("counts each client by the address Deno's info or Bun's server gives beside the request", async () => {
    const limited = wrap(answer);
    expect(await statuses(() => limited(request(), denoInfo('203.0.113.1')), 3)).toEqual([
      200, 200, 429,
    ]);
    expect(await statuses(() => limited(request(), bunServer('203.0.113.2')), 1)).toEqual([200]);
    expect((await limited.limiter.peek('ip:203.0.113.1')).remaining).toBe(0);
    expect((await limited.limiter.peek('ip:203.0.113.2')).remaining).toBe(1);
  });

  it('asks clientIp, when given, with the request and what came beside it', async () => {
    const asked: unknown[] = [];
    const limited = wrap(answer, {
      clientIp: (req, context) => {
        asked.push([new URL(req.url).pathname, context]);
        return (context as { ip: string }).ip;
      },
    });
    await statuses(() => limited(request('/a'), { ip: '198.51.100.1' }), 1);
    // Given, it is asked instead of the runtime's: Deno's info here is not read.
    await statuses(
      () => limited(request('/b'), { ip: '198.51.100.2', ...denoInfo('10.9.9.9') }),
      1,
    );
    expect(asked).toEqual([
      ['/a', { ip: '198.51.100.1' }],
      ['/b', { ip: '198.51.100.2', ...denoInfo('10.9.9.9') }],
    ]);
    expect((await limited.limiter.peek('ip:198.51.100.2')).remaining).toBe(1);
    expect((await limited.limiter.peek('ip:10.9.9.9')).remaining).toBe(2);
  });

  it('believes X-Forwarded-For from the proxies trustProxy names, and no further', async () => {
    const limited = wrap(answer, { trustProxy: 'uniquelocal' });
    const info = denoInfo('10.0.0.1');
    const forwarded = (chain: string) => request('/', { 'x-forwarded-for': chain });
    await statuses(() => limited(forwarded('198.51.100.4, 203.0.113.7, 10.0.0.2'), info), 1);
    await statuses(() => limited(forwarded('203.0.113.7'), info), 1);
    expect((await limited.limiter.peek('ip:203.0.113.7')).remaining).toBe(0);
    expect((await limited.limiter.peek('ip:198.51.100.4')).remaining).toBe(2);
    expect((await limited.limiter.peek('ip:10.0.0.1')).remaining).toBe(2);
  });

  it('counts requests without any address under one shared identity, and reports that once, naming clientIp', async () => {
    const errors: Error[] = [];
    // A Next.js route handler: its context holds the route's params, and no address.
    const limited = wrap((req: Request, _context: { params: Promise<object> }) => answer(req), {
      trustProxy: true,
      onError: (error) => errors.push(error),
    });
    const seen = [];
    for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3', '203.0.113.4']) {
      const from = request('/', { 'x-forwarded-for': client });
      const response = await limited(from, { params: Promise.resolve({}) });
      await response.arrayBuffer();
      seen.push(response.status);
    }
    // Never unlimited: the third request, whoever sends it, is over the shared limit.
    expect(seen).toEqual([200, 200, 429, 429]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(SentinelError);
    expect(errors[0]).toMatchObject({ code: 'NO_CLIENT_ADDRESS' });
    expect(errors[0]?.message).toContain('`clientIp`');
  });

  it('answers a refusal with handler, adding the headers and Retry-After to its response', async () => {
    const calls: Decision[] = [];
    const limited = wrap(answer, {
      limit: 1,
      handler: (req, decision) => {
        calls.push(decision);
        expect(req.ip).toBe('203.0.113.7');
        return Response.json({ custom: true, policy: decision.policy }, { status: 418 });
      },
    });
    const info = denoInfo('203.0.113.7');
    await statuses(() => limited(request(), info), 1);
    const refused = await limited(request(), info);
    expect(refused.status).toBe(418);
    expect(await refused.json()).toEqual({ custom: true, policy: '1-per-1m' });
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(refused.headers.get('ratelimit')).toMatch(/^"1-per-1m";r=0;t=\d+$/);
    expect(calls).toHaveLength(1);
  });

  it('adds the headers to a Response.redirect(), whose headers cannot be changed', async () => {
    const redirect = (_req: Request, _info: unknown) =>
      Response.redirect('http://app.test/elsewhere', 303);
    const limited = wrap(redirect, {
      handler: () => Response.redirect('http://app.test/slow-down', 302),
    });
    const info = denoInfo('203.0.113.7');
    const redirected = await limited(request(), info);
    expect(redirected.status).toBe(303);
    expect(redirected.headers.get('location')).toBe('http://app.test/elsewhere');
    expect(redirected.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=1;t=\d+$/);
    await limited(request(), info);
    const refused = await limited(request(), info);
    expect(refused.status).toBe(302);
    expect(refused.headers.get('location')).toBe('http://app.test/slow-down');
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });

  it('adds the headers to a response from fetch(), passed on body and all', async () => {
    const upstream = createServer((_req, res) => {
      res.setHeader('x-upstream', 'yes');
      res.end('from upstream');
    });
    const url = await listen(upstream);
    closeLater({ close: () => closeServer(upstream) });
    const limited = wrap((_req: Request, _info: unknown) => fetch(url));
    const proxied = await limited(request(), denoInfo('203.0.113.7'));
    expect(proxied.status).toBe(200);
    expect(proxied.headers.get('x-upstream')).toBe('yes');
    expect(proxied.headers.get('ratelimit')).toMatch(/^"2-per-1m";r=1;t=\d+$/);
    expect(await proxied.text()).toBe('from upstream');
  });

  it('with skipFailedRequests, gives back a 500 once its body is read, and counts successes', async () => {
    const limited = wrap(
      (req: Request, _info: unknown) =>
        req.headers.has('x-fail') ? new Response('failed', { status: 500 }) : answer(req),
      { skipFailedRequests: true },
    );
    const info = denoInfo('203.0.113.7');
    const remaining = async () => (await limited.limiter.peek('ip:203.0.113.7')).remaining;
    const failing = () => limited(request('/', { 'x-fail': '1' }), info);
    // Counted on arrival, and given back only once the response has been sent.
    const unsent = await failing();
    expect(await remaining()).toBe(1);
    await unsent.arrayBuffer();
    await waitFor(async () => (await remaining()) === 2, 5_000, 'the failure to be given back');
    expect(await statuses(failing, 5)).toEqual([500, 500, 500, 500, 500]);
    // Typically given back within a few ms of the last body read.
    await waitFor(async () => (await remaining()) === 2, 5_000, 'the failures to be given back');
    expect(await statuses(() => limited(request(), info), 3)).toEqual([200, 200, 429]);
  });

  it('with skipFailedRequests, gives back a request whose handler threw', async () => {
    const limited = wrap(
      (_req: Request, _info: unknown): Response => {
        throw new Error('handler failed');
      },
      { skipFailedRequests: true, limit: 1 },
    );
    const info = denoInfo('203.0.113.7');
    await expect(limited(request(), info)).rejects.toThrow('handler failed');
    await waitFor(
      async () => (await limited.limiter.peek('ip:203.0.113.7')).remaining === 1,
      5_000,
      'the failure to be given back',
    );
    await expect(limited(request(), info)).rejects.toThrow('handler failed');
  });
});
