// sentinel-rls with its Redis killed under load: every call is answered within the deadline,
// OK under the default fail-open mode, with no gRPC error, and counted as a store error.
import { afterEach, expect, it } from 'vitest';
import { startRedis } from './harness/redis-server.ts';
import { configFile, type RlsProcess, rlsClient, startRls } from './rls/rls-process.ts';

const CONFIG = `
domain: edge
descriptors:
  - key: tenant
    rate_limit: { unit: second, requests_per_unit: 1000000 }
`;

let rls: RlsProcess | undefined;
afterEach(async () => {
  await rls?.stop();
});

it('answers every call OK within the deadline while Redis is killed, and counts it', async () => {
  const redis = await startRedis();
  rls = await startRls(['--config', configFile(CONFIG)], { REDIS_URL: redis.url });
  const client = rlsClient(rls.grpcPort);
  const ask = async () => {
    const started = performance.now();
    const answer = await client.shouldRateLimit(
      'edge',
      [{ entries: [{ key: 'tenant', value: 'a' }] }],
      0,
      2_000,
    );
    return { code: answer.overall_code, ms: performance.now() - started };
  };
  // Under load: 16 calls in flight at all times, while the server is killed half way.
  const answers: Array<{ code: string; ms: number }> = [];
  let killed = false;
  const deadline = performance.now() + 3_000;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < deadline) {
        answers.push(await ask());
        if (!killed && performance.now() > deadline - 2_000) {
          killed = true;
          await redis.stop();
        }
      }
    }),
  );
  client.close();
  expect(killed).toBe(true);
  // Every call was answered, none with a gRPC error (Promise.all would have thrown), all OK.
  expect(answers.length).toBeGreaterThan(100);
  expect(answers.every((a) => a.code === 'OK')).toBe(true);
  // The deadline is REDIS_TIMEOUT_MS (50 ms); ten times it bounds every answer, a CPU's
  // scheduling included.
  expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(1_000);
  const metrics = await (await fetch(`http://127.0.0.1:${rls.httpPort}/metrics`)).text();
  expect(metrics).toMatch(/sentinel_rls_store_errors_total \d*[1-9]/);
});

it.each([
  ['closed', 'answers OVER_LIMIT'],
  ['error', 'answers gRPC UNAVAILABLE'],
] as const)('with FAILURE_MODE=%s and Redis down, %s at once', async (mode, _answer) => {
  const redis = await startRedis();
  rls = await startRls(['--config', configFile(CONFIG)], {
    REDIS_URL: redis.url,
    FAILURE_MODE: mode,
  });
  const client = rlsClient(rls.grpcPort);
  const descriptors = [{ entries: [{ key: 'tenant', value: 'a' }] }];
  expect((await client.shouldRateLimit('edge', descriptors)).overall_code).toBe('OK');
  await redis.stop();
  const started = performance.now();
  const answer = client.shouldRateLimit('edge', descriptors, 0, 2_000);
  if (mode === 'closed') {
    expect((await answer).overall_code).toBe('OVER_LIMIT');
  } else {
    await expect(answer).rejects.toMatchObject({
      code: 14,
      details: expect.stringMatching(/unavailable/),
    });
    // /json says so too: the store is unavailable, not the request bad.
    const json = await fetch(`http://127.0.0.1:${rls?.httpPort}/json`, {
      method: 'POST',
      body: JSON.stringify({ domain: 'edge', descriptors }),
    });
    expect(json.status).toBe(503);
  }
  expect(performance.now() - started).toBeLessThan(1_000);
  client.close();
});
