// sentinel-rls as users run it: the bin on real Redis, asked by a real grpc-js client and over
// HTTP, with configurations in envoyproxy/ratelimit's format.
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { awayFromWindowEdge } from '../../examples/race-demo/fleet.ts';
import { connect, uniquePrefix } from '../harness/clients.ts';
import { waitFor } from '../harness/wait-for.ts';
import {
  configFile,
  type RlsClient,
  type RlsProcess,
  rlsClient,
  runToExit,
  startRls,
} from './rls-process.ts';

const CONFIG = `
domain: shop
descriptors:
  - key: tenant
    rate_limit:
      name: tenant
      unit: minute
      requests_per_unit: 3
  - key: route
    rate_limit:
      unit: hour
      requests_per_unit: 100
  - key: report
    rate_limit:
      unit: minute
      requests_per_unit: 1
    shadow_mode: true
  - key: health
    rate_limit:
      unlimited: true
  - key: blocked
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: report_run
    rate_limit: { name: reports, unit: minute, unit_multiplier: 10, requests_per_unit: 2 }
  - key: search
    rate_limit: { name: search, unit: hour, requests_per_unit: 5, algorithm: sliding-window-log }
`;

const tenant = (value: string) => ({ entries: [{ key: 'tenant', value }] });
const route = (value: string) => ({ entries: [{ key: 'route', value }] });

describe('sentinel-rls on Redis', () => {
  let rls: RlsProcess;
  let client: RlsClient;
  let config: string;
  const prefix = uniquePrefix('rls');
  let admin: ReturnType<typeof connect>;

  beforeAll(async () => {
    admin = connect();
    config = configFile(CONFIG);
    rls = await startRls(['--config', config], {
      REDIS_URL: inject('redisUrl'),
      PREFIX: prefix,
      LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
    });
    client = rlsClient(rls.grpcPort);
  });
  afterAll(async () => {
    client?.close();
    await rls?.stop();
  });
  // Most descriptors count per minute in a fixed window: a test that met a minute's end would
  // see its earlier hits forgotten (one did, 126 ms long, in a CI run).
  beforeEach(() => awayFromWindowEdge(admin, 60_000));

  it('answers OK until the limit, then OVER_LIMIT, with the limit, what is left and the reset', async () => {
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await client.shouldRateLimit('shop', [tenant('a')]));
    expect(answers.map((a) => a.overall_code)).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
    expect(answers.map((a) => a.statuses[0]?.limit_remaining)).toEqual([2, 1, 0, 0]);
    const status = answers[0]?.statuses[0];
    expect(status?.current_limit).toMatchObject({
      name: 'tenant',
      requests_per_unit: 3,
      unit: 'MINUTE',
    });
    const reset = status?.duration_until_reset;
    expect((reset?.seconds ?? 0) * 1000 + (reset?.nanos ?? 0) / 1e6).toBeGreaterThan(0);
    expect((reset?.seconds ?? 61) <= 60).toBe(true);
  });

  it('counts hits_addend, 0 meaning 1', async () => {
    expect(
      (await client.shouldRateLimit('shop', [tenant('b')], 2)).statuses[0]?.limit_remaining,
    ).toBe(1);
    expect(
      (await client.shouldRateLimit('shop', [tenant('b')], 0)).statuses[0]?.limit_remaining,
    ).toBe(0);
    expect((await client.shouldRateLimit('shop', [tenant('b')], 1)).overall_code).toBe(
      'OVER_LIMIT',
    );
  });

  it('decides every descriptor at once: a refused request takes nothing from any', async () => {
    for (let i = 0; i < 3; i++) await client.shouldRateLimit('shop', [tenant('c'), route('/x')]);
    const refused = await client.shouldRateLimit('shop', [tenant('c'), route('/x')]);
    expect(refused.overall_code).toBe('OVER_LIMIT');
    expect(refused.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    // The route counted the three admitted requests only.
    const next = await client.shouldRateLimit('shop', [route('/x')]);
    expect(next.statuses[0]?.limit_remaining).toBe(100 - 4);
  });

  it('answers OK for a descriptor with no limit, unlimited and shadowed ones, in request order', async () => {
    const shadow = { entries: [{ key: 'report', value: 'monthly' }] };
    await client.shouldRateLimit('shop', [shadow]);
    const answer = await client.shouldRateLimit('shop', [
      { entries: [{ key: 'nothing', value: 'here' }] },
      { entries: [{ key: 'health', value: 'x' }] },
      shadow,
    ]);
    expect(answer.overall_code).toBe('OK');
    expect(answer.statuses.map((s) => s.code)).toEqual(['OK', 'OK', 'OK']);
    expect(answer.statuses[0]?.current_limit).toBeNull();
    expect(answer.statuses[1]?.limit_remaining).toBe(0xffff_ffff);
    expect(answer.statuses[2]?.limit_remaining).toBe(0);
  });

  it('refuses everything at a limit of 0, consuming nothing from the other descriptors', async () => {
    const refused = await client.shouldRateLimit('shop', [
      { entries: [{ key: 'blocked', value: 'x' }] },
      route('/zero'),
    ]);
    expect(refused.overall_code).toBe('OVER_LIMIT');
    expect(refused.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OK']);
    expect(refused.statuses[1]?.limit_remaining).toBe(100);
  });

  it("applies a descriptor's own limit from the request in place of the configured one", async () => {
    const own = { ...tenant('override'), limit: { requests_per_unit: 1, unit: 'HOUR' } };
    const first = await client.shouldRateLimit('shop', [own]);
    expect(first.overall_code).toBe('OK');
    expect(first.statuses[0]?.current_limit).toMatchObject({
      requests_per_unit: 1,
      unit: 'HOUR',
    });
    expect((await client.shouldRateLimit('shop', [own])).overall_code).toBe('OVER_LIMIT');
  });

  it('takes windows of several units and any of the five algorithms', async () => {
    const run = { entries: [{ key: 'report_run', value: 'q3' }] };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await client.shouldRateLimit('shop', [run]));
    expect(answers.map((a) => a.overall_code)).toEqual(['OK', 'OK', 'OVER_LIMIT']);
    const policy = answers[0]?.response_headers_to_add.find((h) => h.key === 'RateLimit-Policy');
    expect(policy?.value).toBe('"reports";q=2;w=600');
    const search = { entries: [{ key: 'search', value: 'all' }] };
    for (let i = 0; i < 5; i++) await client.shouldRateLimit('shop', [search]);
    expect((await client.shouldRateLimit('shop', [search])).overall_code).toBe('OVER_LIMIT');
    const keys = await admin.keys(`${prefix}:*`);
    expect(keys.some((k) => k.endsWith(':search:1h:sliding-window-log'))).toBe(true);
    expect(keys.some((k) => k.endsWith(':reports:10m:fixed-window'))).toBe(true);
  });

  it('adds draft-11 RateLimit-Policy and RateLimit headers when enabled', async () => {
    const answer = await client.shouldRateLimit('shop', [tenant('d')]);
    const headers = Object.fromEntries(answer.response_headers_to_add.map((h) => [h.key, h.value]));
    expect(headers['RateLimit-Policy']).toBe('"tenant";q=3;w=60');
    expect(headers.RateLimit).toMatch(/^"tenant";r=2;t=\d+$/);
  });

  it('refuses a request without a domain, without descriptors or with too many, with a gRPC error', async () => {
    await expect(client.shouldRateLimit('', [tenant('e')])).rejects.toThrow(
      /domain must not be empty/,
    );
    await expect(client.shouldRateLimit('shop', [])).rejects.toThrow(
      /descriptor list must not be empty/,
    );
    const many = Array.from({ length: 257 }, (_, i) => route(`/${i}`));
    await expect(client.shouldRateLimit('shop', many)).rejects.toThrow(/more than the 256 allowed/);
  });

  it('counts a request it cannot decide as a service error', async () => {
    await expect(client.shouldRateLimit('', [tenant('e')])).rejects.toThrow();
    const metrics = await (await fetch(`http://127.0.0.1:${rls.httpPort}/metrics`)).text();
    expect(metrics).toMatch(/should_rate_limit_error\{err_type="service_error"\} [1-9]/);
  });

  it('serves health, /healthcheck, /json and /metrics', async () => {
    expect(await client.health()).toBe('SERVING');
    const base = `http://127.0.0.1:${rls.httpPort}`;
    const health = await fetch(`${base}/healthcheck`);
    expect([health.status, await health.text()]).toEqual([200, 'OK']);
    const ask = () =>
      fetch(`${base}/json`, {
        method: 'POST',
        body: JSON.stringify({ domain: 'shop', descriptors: [tenant('f')], hits_addend: 2 }),
      });
    const first = await ask();
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({
      overallCode: 'OK',
      statuses: [{ code: 'OK', limitRemaining: 1 }],
    });
    const second = await ask();
    expect(second.status).toBe(429);
    expect(await second.json()).toMatchObject({ overallCode: 'OVER_LIMIT' });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/total_hits\{[^}]*tenant[^}]*\} \d+/);
    expect(metrics).toMatch(/over_limit\{[^}]*tenant[^}]*\} [1-9]/);
  });

  it('reloads a changed file, keeping what was counted', async () => {
    for (let i = 0; i < 2; i++) await client.shouldRateLimit('shop', [tenant('g')]);
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace('requests_per_unit: 3', 'requests_per_unit: 5'),
    );
    await waitFor(async () => {
      const answer = await client.shouldRateLimit('shop', [tenant('probe')], 0);
      return answer.statuses[0]?.current_limit?.requests_per_unit === 5;
    }, 10_000);
    // g counted two before the reload: this third leaves two of the five.
    expect((await client.shouldRateLimit('shop', [tenant('g')])).statuses[0]?.limit_remaining).toBe(
      2,
    );
    // A broken file is logged and the last good configuration kept.
    writeFileSync(
      config,
      'domain: shop\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    );
    await waitFor(() => /fortnight/.test(rls.stderr()), 10_000);
    expect((await client.shouldRateLimit('shop', [tenant('g')])).statuses[0]?.limit_remaining).toBe(
      1,
    );
  });
});

describe('sentinel-rls start-up', () => {
  it('runs on the memory store without REDIS_URL, and says so, and which variables it ignores', async () => {
    const rls = await startRls(['--config', configFile(CONFIG)], {
      REDIS_URL: '',
      USE_STATSD: 'true',
    });
    const client = rlsClient(rls.grpcPort);
    try {
      const answers = [];
      for (let i = 0; i < 4; i++)
        answers.push((await client.shouldRateLimit('shop', [tenant('a')])).overall_code);
      expect(answers).toEqual(['OK', 'OK', 'OK', 'OVER_LIMIT']);
      expect(rls.stderr()).toMatch(/REDIS_URL is not set/);
      expect(rls.stderr()).toMatch(/no effect here: USE_STATSD/);
    } finally {
      client.close();
      await rls.stop();
    }
  });

  it('adds the three older header fields under RESPONSE_HEADERS=legacy', async () => {
    const rls = await startRls(['--config', configFile(CONFIG)], {
      REDIS_URL: '',
      LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
      RESPONSE_HEADERS: 'legacy',
    });
    const client = rlsClient(rls.grpcPort);
    try {
      const answer = await client.shouldRateLimit('shop', [tenant('a')]);
      const headers = Object.fromEntries(
        answer.response_headers_to_add.map((h) => [h.key, h.value]),
      );
      expect(headers).toMatchObject({ 'RateLimit-Limit': '3', 'RateLimit-Remaining': '2' });
      expect(Number(headers['RateLimit-Reset'])).toBeGreaterThan(0);
    } finally {
      client.close();
      await rls.stop();
    }
  });

  it('exits 1 with one line naming the file and the field of a bad configuration', async () => {
    const bad = configFile(
      'domain: shop\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n',
    );
    const { code, stderr } = await runToExit(['--config', bad]);
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(bad);
    expect(lines[0]).toMatch(/unit/);
  });

  it('exits 1 naming a bad variable, and prints every variable for --help', async () => {
    const bad = await runToExit(['--config', configFile(CONFIG)], { GRPC_PORT: 'abc' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/GRPC_PORT/);
    const help = await runToExit(['--help']);
    expect(help.code).toBe(0);
    for (const name of ['GRPC_PORT', 'REDIS_URL', 'REDIS_TYPE', 'SHADOW_MODE', 'LOG_LEVEL']) {
      expect(help.stdout).toContain(name);
    }
  });
});
