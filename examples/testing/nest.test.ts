// The Nest app's rate limits tested with @nestjs/testing and supertest: docs/testing.md quotes these.
import { randomUUID } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { Test, type TestingModuleBuilder } from '@nestjs/testing';
import { MemoryStore, QUOTA_EXCEEDED, SentinelService } from '@sentinel/nestjs';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AppModule, type AppOptions, ExportService } from './nest-app.ts';

// Every test gets a store of its own, on a clock it moves: budgets start full, and no test waits.
let now: number;
let store: MemoryStore;
const apps: INestApplication[] = [];
beforeEach(() => {
  now = Date.UTC(2026, 0, 1);
  store = new MemoryStore({ clock: () => now });
});
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
  store.close();
});

/** The app's module on `options`, initialised; `override` replaces providers, as for any test. */
async function createApp(
  options: AppOptions,
  override: (testing: TestingModuleBuilder) => TestingModuleBuilder = (testing) => testing,
): Promise<INestApplication> {
  const moduleRef = await override(
    Test.createTestingModule({ imports: [AppModule.forRoot(options)] }),
  ).compile();
  const app = moduleRef.createNestApplication();
  apps.push(app);
  return app.init();
}

describe('a client over its limit', () => {
  it('gets a 429 with Retry-After, the RateLimit headers and a problem body', async () => {
    const app = await createApp({ store });
    const server = app.getHttpServer();
    for (let i = 0; i < 10; i++) await request(server).get('/hello').expect(200);
    const refused = await request(server)
      .get('/hello')
      .expect(429)
      .expect('content-type', /^application\/problem\+json/);
    // FREE refills a request every 6 s, and is full again a minute after the last one.
    expect(refused.headers['retry-after']).toBe('6');
    expect(refused.headers['ratelimit-policy']).toBe('"free-minute";q=10;w=60');
    expect(refused.headers.ratelimit).toBe('"free-minute";r=0;t=60');
    expect(refused.body).toMatchObject({
      type: QUOTA_EXCEEDED,
      status: 429,
      'violated-policies': ['free-minute'],
    });
  });

  it('is refused at once when the test has spent its budget through the limiter', async () => {
    const app = await createApp({ store });
    // 1000 a minute: spent in one call rather than in 1000 requests.
    await app
      .get(SentinelService)
      .limiter.penalize('tenant:initech', { tier: 'ENTERPRISE', cost: 1000 });
    await request(app.getHttpServer()).get('/hello').set('x-api-key', 'enterprise-key').expect(429);
  });
});

describe('one app for the whole file', () => {
  // Built once, on the process's memory store: reset what each test spent after it.
  let app: INestApplication;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [AppModule.forRoot({ prefix: `hello-${randomUUID()}` })],
    }).compile();
    app = await moduleRef.createNestApplication().init();
  });
  afterEach(() => app.get(SentinelService).limiter.reset('ip:127.0.0.1'));
  afterAll(() => app.close());

  it('spends the whole FREE budget', async () => {
    for (let i = 0; i < 10; i++) await request(app.getHttpServer()).get('/hello').expect(200);
    await request(app.getHttpServer()).get('/hello').expect(429);
  });

  it('starts the next test with the budget full', async () => {
    const res = await request(app.getHttpServer()).get('/hello').expect(200);
    expect(res.body).toEqual({ tier: 'FREE', remaining: 9 });
  });
});

describe('tiers and API keys', () => {
  it("counts a verified key in its tenant's tier", async () => {
    const app = await createApp({ store });
    const res = await request(app.getHttpServer())
      .get('/hello')
      .set('x-api-key', 'pro-key')
      .expect(200);
    expect(res.body).toEqual({ tier: 'PRO', remaining: 19 });
    expect(res.headers['ratelimit-policy']).toBe('"pro-minute";q=100;w=60, "pro-burst";q=20;w=1');
  });

  it('answers a key nobody issued with a 401 problem, before it counts', async () => {
    const app = await createApp({ store });
    const server = app.getHttpServer();
    const res = await request(server).get('/hello').set('x-api-key', 'made-up').expect(401);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    await request(server).get('/hello').expect(200, { tier: 'FREE', remaining: 9 });
  });
});

describe('time, moved by the test', () => {
  it('refills FREE one request every 6 s', async () => {
    const app = await createApp({ store });
    const server = app.getHttpServer();
    for (let i = 0; i < 10; i++) await request(server).get('/hello').expect(200);
    await request(server).get('/hello').expect(429).expect('retry-after', '6');
    now += 6_000;
    await request(server).get('/hello').expect(200);
    await request(server).get('/hello').expect(429);
  });

  it('holds a client in its penalty box for an hour after a sixth login attempt', async () => {
    const app = await createApp({ store });
    const server = app.getHttpServer();
    for (let i = 0; i < 5; i++) await request(server).post('/login').expect(401);
    await request(server).post('/login').expect(429).expect('retry-after', '3600');
    now += 15 * 60_000; // a new 15-minute window, but the box holds
    await request(server).post('/login').expect(429);
    now += 45 * 60_000;
    await request(server).post('/login').expect(401, { error: 'wrong password' });
  });

  it("lets the next export in once a stuck export's 30 s lease has lapsed", async () => {
    let unstick: (rows: unknown[]) => void = () => {};
    const stuck = new Promise<unknown[]>((resolve) => {
      unstick = resolve;
    });
    let runs = 0;
    const exportRows = async () => (++runs === 1 ? stuck : []);
    const app = await createApp({ store }, (testing) =>
      testing.overrideProvider(ExportService).useValue({ exportRows }),
    );
    const server = app.getHttpServer();
    // The first export holds the one slot while it is stuck.
    const first = request(server)
      .get('/export')
      .then((res) => res.status);
    await vi.waitFor(() => expect(runs).toBe(1));
    await request(server).get('/export').expect(429);
    now += 30_000;
    await request(server).get('/export').expect(200);
    unstick([]);
    expect(await first).toBe(200);
  });
});

describe('a route group', () => {
  it('lets a client in again once the test resets its login budget', async () => {
    const app = await createApp({ store });
    const server = app.getHttpServer();
    for (let i = 0; i < 5; i++) await request(server).post('/login').expect(401);
    await request(server).post('/login').expect(429);
    // The login counts in its group's limiter, apart from the module's.
    await app.get(SentinelService).limiter.reset('ip:127.0.0.1');
    await request(server).post('/login').expect(429);
    await app.get(SentinelService).groups.get('login')?.reset('ip:127.0.0.1');
    await request(server).post('/login').expect(401);
  });
});

describe("a runner's fake Date", () => {
  afterEach(() => vi.useRealTimers());

  it('moves the default memory store too, when only Date is faked', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.UTC(2026, 0, 1) });
    // No store: the process's memory store, on Date.now().
    const app = await createApp({ prefix: `fake-date-${randomUUID()}` });
    const server = app.getHttpServer();
    for (let i = 0; i < 10; i++) await request(server).get('/hello').expect(200);
    await request(server).get('/hello').expect(429);
    vi.setSystemTime(Date.UTC(2026, 0, 1, 0, 0, 6));
    await request(server).get('/hello').expect(200);
  });
});

describe('on a real Redis, as in CI', () => {
  // CI starts Redis and sets REDIS_URL; a prefix of this run's own keeps runs and tests apart.
  const redisUrl = process.env.REDIS_URL;
  const prefix = `test-${randomUUID()}`;
  beforeAll(() => {
    if (redisUrl === undefined) throw new Error('These tests need a Redis: set REDIS_URL');
  });

  it('shares one budget between two instances of the app, and resets it', async () => {
    // Each app builds its client from redisUrl, and app.close() after the test closes it.
    const one = await createApp({ redisUrl, prefix });
    const two = await createApp({ redisUrl, prefix });
    // Ten requests, taking turns between the two instances.
    for (let i = 0; i < 5; i++) {
      await request(one.getHttpServer()).get('/hello').expect(200);
      await request(two.getHttpServer()).get('/hello').expect(200);
    }
    await request(one.getHttpServer()).get('/hello').expect(429);
    await request(two.getHttpServer()).get('/hello').expect(429);
    await one.get(SentinelService).limiter.reset('ip:127.0.0.1');
    await request(two.getHttpServer()).get('/hello').expect(200);
  });
});
