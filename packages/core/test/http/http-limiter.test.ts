// createHttpLimiter: the verdicts every adapter turns into responses, from the memory store.
import { describe, expect, it } from 'vitest';
import {
  byApiKey,
  COST_EXCEEDS_LIMIT,
  createHttpLimiter,
  type Decision,
  type HttpLimiterOptions,
  MemoryStore,
  QUOTA_EXCEEDED,
  type Store,
} from '../../src/index.ts';

const FREE = { FREE: { name: 'free-minute', limit: 2, window: '1m' as const } };
const client = (ip = '203.0.113.9', headers: Record<string, string> = {}) => ({ headers, ip });

// Limiters without a store share the process's memory store: each test counts under its own prefix.
let tests = 0;
async function drain(options: HttpLimiterOptions, times: number, req = client()) {
  const limiter = createHttpLimiter({ prefix: `http-${++tests}`, ...options });
  const verdicts = [];
  for (let i = 0; i < times; i++) verdicts.push(await limiter.check(req));
  return verdicts;
}

describe('a request over its limit', () => {
  it('gets a 429 with Retry-After and a quota-exceeded problem naming the policy', async () => {
    const [, , refused] = await drain({ tiers: FREE }, 3);
    expect(refused).toMatchObject({ action: 'respond', status: 429 });
    if (refused?.action !== 'respond') throw new Error('not refused');
    expect(refused.headers['Retry-After']).toMatch(/^[1-9]\d*$/);
    expect(refused.body).toMatchObject({
      type: QUOTA_EXCEEDED,
      status: 429,
      'violated-policies': ['free-minute'],
    });
  });

  it('passes in shadow mode, with the same headers, and is still reported', async () => {
    const limited: Decision[] = [];
    const [, , shadowed] = await drain(
      { tiers: FREE, mode: 'shadow', onLimited: (_, d) => limited.push(d) },
      3,
    );
    expect(shadowed).toMatchObject({ action: 'next' });
    expect(shadowed?.headers['Retry-After']).toBeDefined();
    expect(limited).toHaveLength(1);
  });
});

describe('a request costing more than a limit', () => {
  const tiers = {
    FREE: [
      { name: 'free-minute', limit: 10, window: '1m' as const },
      { name: 'free-burst', limit: 3, window: '1s' as const },
    ],
  };

  it('gets a 403 without Retry-After, naming the policy, its limit and the cost', async () => {
    const limited: Decision[] = [];
    const [refused, again] = await drain(
      { tiers, cost: 5, onLimited: (_, d) => limited.push(d) },
      2,
    );
    expect(refused).toMatchObject({
      action: 'respond',
      reason: 'cost-exceeds-limit',
      status: 403,
      body: {
        type: COST_EXCEEDS_LIMIT,
        status: 403,
        policy: 'free-burst',
        limit: 3,
        cost: 5,
        'violated-policies': ['free-burst'],
      },
    });
    if (refused?.action !== 'respond') throw new Error('not refused');
    expect(refused.body.detail).toMatch(/costs 5.*limit of 3 per 1s of free-burst/);
    expect(refused.headers['Retry-After']).toBeUndefined();
    expect(refused.headers['RateLimit-Policy']).toBe(
      '"free-minute";q=10;w=60, "free-burst";q=3;w=1',
    );
    // It took nothing: the minute policy still has its whole limit.
    expect(refused.decision?.policies.map((p) => p.remaining)).toEqual([10, 3]);
    expect(again).toMatchObject({ reason: 'cost-exceeds-limit' });
    expect(limited).toHaveLength(2);
  });

  it('names the smallest limit when several are below the cost, and passes in shadow mode', async () => {
    const [refused] = await drain({ tiers, cost: 11 }, 1);
    expect(refused?.action === 'respond' && refused.body).toMatchObject({
      policy: 'free-burst',
      limit: 3,
      cost: 11,
      'violated-policies': ['free-minute', 'free-burst'],
    });
    const [shadowed] = await drain({ tiers, cost: 11, mode: 'shadow' }, 1);
    expect(shadowed).toMatchObject({ action: 'next', decision: { allowed: false } });
    expect(shadowed?.headers['Retry-After']).toBeUndefined();
  });
});

describe('a decision that does not know the state', () => {
  it('sends the policy and no state: an unknown tier does not claim a full quota', async () => {
    const [verdict] = await drain(
      {
        tiers: FREE,
        headers: ['draft-11', 'legacy'],
        identify: () => ({ key: 'k', tier: 'GOLD' }),
        onError: () => {},
      },
      1,
    );
    expect(verdict).toMatchObject({ action: 'next', decision: { degraded: 'allow' } });
    expect(verdict?.headers).toEqual({
      'RateLimit-Policy': '"free-minute";q=2;w=60',
      'X-RateLimit-Limit': '2',
    });
  });
});

describe('legacy headers', () => {
  it("state the reset as a Unix time on the memory store's clock", async () => {
    const at = Date.UTC(2030, 0, 1, 12, 0, 0, 300);
    const store = new MemoryStore({ clock: () => at });
    const [first, second] = await drain({ tiers: FREE, headers: 'legacy', store }, 2);
    // Two tokens a minute: after the first, full again in 30 s; after the second, in 60 s.
    expect(first?.headers['X-RateLimit-Reset']).toBe(String(Math.ceil((at + 30_000) / 1000)));
    expect(second?.headers['X-RateLimit-Reset']).toBe(String(Math.ceil((at + 60_000) / 1000)));
  });
});

describe('requests left alone', () => {
  it('by skip or the allow-list carry no decision', async () => {
    const skipped = await drain({ tiers: FREE, skip: () => true }, 3);
    expect(skipped.map((v) => [v.action, v.decision])).toEqual(
      [1, 2, 3].map(() => ['next', undefined]),
    );
    const listed = await drain({ tiers: FREE, allowList: ['203.0.113.0/24'] }, 3);
    expect(listed.every((v) => v.action === 'next' && v.decision === undefined)).toBe(true);
  });
});

describe('budgets', () => {
  it('are shared by limiters of one group and kept apart across groups', async () => {
    const store = new MemoryStore();
    const search = createHttpLimiter({ tiers: FREE, group: 'search', store });
    const alsoSearch = createHttpLimiter({ tiers: FREE, group: 'search', store });
    const other = createHttpLimiter({ tiers: FREE, group: 'export', store });
    expect((await search.check(client())).decision?.remaining).toBe(1);
    expect((await alsoSearch.check(client())).decision?.remaining).toBe(0);
    expect((await other.check(client())).decision?.remaining).toBe(1);
  });

  it('charge what cost says, as a number or a function of the request', async () => {
    const [first] = await drain({ tiers: { FREE: { limit: 10, window: '1m' } }, cost: 4 }, 1);
    expect(first?.decision?.remaining).toBe(6);
    const [byPath] = await drain(
      {
        tiers: { FREE: { limit: 10, window: '1m' } },
        cost: (req) => (req.headers['x-heavy'] ? 7 : 1),
      },
      1,
      client('198.51.100.3', { 'x-heavy': '1' }),
    );
    expect(byPath?.decision?.remaining).toBe(3);
  });
});

describe('identities', () => {
  it('answer 401 for an API key the lookup rejects', async () => {
    const [verdict] = await drain(
      { tiers: FREE, identify: byApiKey({ lookup: () => null, unknownKey: 'reject' }) },
      1,
      client('198.51.100.4', { 'x-api-key': 'nobody' }),
    );
    expect(verdict).toMatchObject({ action: 'respond', status: 401, body: { status: 401 } });
  });
});

describe('identify, skip and cost answering later', () => {
  // The defaults answer at once, and check() then skips the waits: these take the other path.
  it.each([
    ['a promise', (key: string) => Promise.resolve({ key })],
    // Anything `await` would adopt, as the contract has always allowed.
    // biome-ignore lint/suspicious/noThenProperty: a thenable is what this case is about.
    ['a thenable', (key: string) => ({ then: (settle: (v: unknown) => void) => settle({ key }) })],
  ])('count under the identity that %s resolves to', async (_, later) => {
    const verdicts = await drain(
      // biome-ignore lint/suspicious/noExplicitAny: a thenable is not the declared Promise.
      { tiers: FREE, identify: (req) => later(String(req.headers['x-tenant'])) as any },
      3,
      client('203.0.113.9', { 'x-tenant': 'acme' }),
    );
    expect(verdicts.map((v) => v.decision?.allowed)).toEqual([true, true, false]);
  });

  it('skip a request that an async skip says to skip, and charge an async cost', async () => {
    const skipped = await drain({ tiers: FREE, skip: async () => true }, 3);
    expect(skipped.map((v) => v.decision)).toEqual([undefined, undefined, undefined]);
    const [first, second] = await drain(
      { tiers: FREE, skip: async () => false, cost: async () => 2 },
      2,
    );
    expect(first?.decision).toMatchObject({ allowed: true, remaining: 0 });
    expect(second?.decision?.allowed).toBe(false);
  });
});

describe('failures before the store', () => {
  it('are reported with the request and let through by default', async () => {
    const errors: Array<[string, unknown]> = [];
    const [verdict] = await drain(
      {
        tiers: FREE,
        identify: () => {
          throw new Error('identify broke');
        },
        onError: (error, req) => errors.push([error.message, req.ip]),
      },
      1,
    );
    expect(verdict).toMatchObject({ action: 'next', decision: undefined });
    expect(errors).toEqual([['identify broke', '203.0.113.9']]);
  });

  it.each([
    ['cost throws', { cost: () => Promise.reject(new Error('pricing down')) }, /pricing down/],
    ['cost returns -1', { cost: () => -1 }, /`cost` must be a positive integer, got -1/],
    ['cost returns 1.5', { cost: () => 1.5 }, /`cost` must be a positive integer, got 1.5/],
    [
      'skip throws',
      {
        skip: () => {
          throw new Error('flags down');
        },
      },
      /flags down/,
    ],
    ['skip returns a string', { skip: () => 'yes' }, /`skip` returned 'yes', not true or false/],
    ['identify returns a string', { identify: () => 'k' }, /`identify` returned 'k', not \{ key/],
    ['identify returns a numeric key', { identify: () => ({ key: 5 }) }, /a key that is 5/],
    ['identify returns an empty key', { identify: () => ({ key: '' }) }, /a key that is ''/],
    [
      'identify returns a numeric tier',
      { identify: () => ({ key: 'k', tier: 1 }) },
      /a tier that is 1/,
    ],
  ])('are reported on every request when %s, and let through', async (_, options, message) => {
    const errors: Array<[Error, unknown]> = [];
    const verdicts = await drain(
      {
        tiers: FREE,
        ...(options as object),
        onError: (error, req) => errors.push([error, req.ip]),
      },
      3,
    );
    expect(verdicts).toEqual(
      [1, 2, 3].map(() => ({ action: 'next', headers: {}, decision: undefined })),
    );
    expect(errors).toHaveLength(3);
    for (const [error, ip] of errors) {
      expect(error).toBeInstanceOf(Error);
      expect(error.message).toMatch(message);
      expect(ip).toBe('203.0.113.9');
    }
  });

  it('are refused with 503 when failing closed', async () => {
    const [verdict] = await drain(
      { tiers: FREE, onStoreError: 'deny', cost: () => -1, onError: () => {} },
      1,
    );
    expect(verdict).toMatchObject({ action: 'respond', status: 503, body: { status: 503 } });
  });

  it('include an unknown tier, answered by the failure mode', async () => {
    const errors: string[] = [];
    const [verdict] = await drain(
      {
        tiers: FREE,
        onStoreError: 'deny',
        identify: () => ({ key: 'k', tier: 'GOLD' }),
        onError: (e) => errors.push(e.message),
      },
      1,
    );
    expect(verdict).toMatchObject({ action: 'respond', status: 503 });
    expect(errors).toEqual(["No tier named 'GOLD'"]);
  });
});

describe('store failures', () => {
  it('reach onError once each, with their request, and never as a process warning', async () => {
    const broken: Store = {
      evaluate: () => Promise.reject(new Error('store down')),
      reset: () => {},
      close: () => {},
    };
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const errors: Array<[string, unknown]> = [];
      const verdicts = await drain(
        {
          tiers: FREE,
          store: broken,
          breaker: false,
          onError: (error, req) => errors.push([error.message, req.ip]),
        },
        3,
      );
      expect(verdicts.map((v) => v.decision?.degraded)).toEqual(['allow', 'allow', 'allow']);
      expect(errors).toEqual([1, 2, 3].map(() => ['store down', '203.0.113.9']));
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('options', () => {
  it.each([
    [{ headers: 'draft-99' }, '`headers`'],
    [{ cost: 0 }, '`cost`'],
    [{ group: 'a b' }, '`group`'],
    [{ mode: 'audit' }, '`mode`'],
    [{ skip: true }, '`skip`'],
    [{ allowList: ['x'] }, '`allowList`'],
    [{ identify: 'ip' }, '`identify`'],
    [{ allowList: '10.0.0.0/8' }, '`allowList`'],
    [{ onLimited: 'log' }, '`onLimited`'],
  ])('reject %j at construction', (options, option) => {
    expect(() => createHttpLimiter({ tiers: FREE, ...(options as object) })).toThrow(TypeError);
    expect(() => createHttpLimiter({ tiers: FREE, ...(options as object) })).toThrow(option);
  });
});

describe('unknown options', () => {
  it.each([
    [{ onLimted: () => {} }, /`onLimted` is not an option: did you mean `onLimited`\?/],
    [{ identfy: () => null }, /`identfy` is not an option: did you mean `identify`\?/],
    [{ allowlist: [] }, /`allowlist` is not an option: did you mean `allowList`\?/],
    [{ onStoreErrors: 'deny' }, /`onStoreErrors`.*`onStoreError`/],
    [{ windowMs: 60_000 }, /`windowMs`.*`window`/],
  ])('throw a TypeError naming them: %j', (extra, message) => {
    const create = () => createHttpLimiter({ tiers: FREE, ...(extra as object) });
    expect(create).toThrow(TypeError);
    expect(create).toThrow(message);
  });

  it('include none of the options either layer takes', () => {
    const limiter = createHttpLimiter({
      tiers: FREE,
      prefix: `http-${++tests}`,
      identify: () => null,
      headers: ['draft-6', 'legacy'],
      cost: 2,
      group: 'all-known',
      skip: () => false,
      allowList: [],
      onLimited: () => {},
      onError: () => {},
      mode: 'shadow',
      onStoreError: 'local',
      breaker: false,
    });
    expect(limiter.limiter).toBeDefined();
  });
});

describe('callbacks', () => {
  it('that throw never change the verdict: onLimited goes to onError, onError to a warning', async () => {
    const errors: string[] = [];
    const verdicts = await drain(
      {
        tiers: FREE,
        onLimited: () => {
          throw new Error('metrics down');
        },
        onError: (error) => {
          errors.push(error.message);
          throw new Error('logger down');
        },
      },
      3,
    );
    expect(verdicts.map((v) => v.action)).toEqual(['next', 'next', 'respond']);
    expect(errors).toEqual(['metrics down']);
  });
});
