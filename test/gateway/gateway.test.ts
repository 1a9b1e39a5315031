// `pnpm start`'s gateway with no configuration: demo keys, the memory store, probes, metrics, shutdown.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../harness/wait-for.ts';
import { startGateway } from './gateway-process.ts';

const FREE = { 'x-api-key': 'demo-free-key' };
const PRO = { 'x-api-key': 'demo-pro-key' };

describe('the gateway with no configuration', () => {
  it('prints its address, the demo keys of each tier and a curl line with the FREE key', async () => {
    const gateway = await startGateway();
    const { stdout } = gateway.output();
    expect(stdout).toContain(`listening on ${gateway.url}`);
    expect(stdout).toMatch(/FREE\s+demo-free-key/);
    expect(stdout).toMatch(/PRO\s+demo-pro-key/);
    expect(stdout).toMatch(/ENTERPRISE\s+demo-enterprise-key/);
    expect(stdout).toContain(`curl -i ${gateway.url}/hello -H 'x-api-key: demo-free-key'`);
  });

  it('forwards 10 FREE requests to the echo upstream, then answers 429 with RateLimit headers and Retry-After', async () => {
    const { url } = await startGateway();
    const admitted = [];
    for (let i = 0; i < 10; i++) admitted.push(await fetch(`${url}/hello`, { headers: FREE }));
    expect(admitted.map((response) => response.status)).toEqual(Array(10).fill(200));
    expect(await admitted[9]?.json()).toMatchObject({
      upstream: 'echo',
      path: '/hello',
      tier: 'FREE',
    });
    expect(admitted[9]?.headers.get('ratelimit')).toBe('"free-minute";r=0;t=60');

    const refused = await fetch(`${url}/hello`, { headers: FREE });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit-policy')).toBe('"free-minute";q=10;w=60');
    expect(refused.headers.get('ratelimit')).toMatch(/^"free-minute";r=0;t=\d+$/);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toMatchObject({
      status: 429,
      'violated-policies': ['free-minute'],
    });

    // Another tenant's budget is its own, and the upstream hears its tier.
    const pro = await fetch(`${url}/hello`, { headers: PRO });
    expect(pro.status).toBe(200);
    expect(await pro.json()).toMatchObject({ tier: 'PRO' });
  });

  it('answers a key nobody issued with 401, and the probes without limiting them', async () => {
    const { url } = await startGateway();
    expect((await fetch(`${url}/hello`, { headers: { 'x-api-key': 'made-up' } })).status).toBe(401);
    for (let i = 0; i < 12; i++) {
      const health = await fetch(`${url}/healthz`, { headers: FREE });
      expect(health.status).toBe(200);
      expect(health.headers.get('ratelimit')).toBeNull();
    }
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok' });
    const ready = await fetch(`${url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      status: 'ready',
      redis: 'memory',
      breakerOpen: false,
    });
  });

  it("serves Sentinel's metrics and the process's in Prometheus text after traffic", async () => {
    const { url } = await startGateway();
    for (let i = 0; i < 11; i++) await fetch(`${url}/hello`, { headers: FREE });
    const response = await fetch(`${url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/plain');
    const text = await response.text();
    expect(text).toContain(
      'sentinel_decisions_total{tier="FREE",policy="free-minute",outcome="allowed"} 10',
    );
    expect(text).toContain(
      'sentinel_decisions_total{tier="FREE",policy="free-minute",outcome="limited"} 1',
    );
    expect(text).toMatch(/^sentinel_store_duration_seconds_count 11$/m);
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).not.toContain('demo-free-key');
  });

  it('logs a limited request at debug level by tier, policy and request id, never the raw key', async () => {
    const gateway = await startGateway({ LOG_LEVEL: 'debug' });
    for (let i = 0; i < 11; i++) await fetch(`${gateway.url}/hello`, { headers: FREE });
    const lines = () =>
      gateway
        .output()
        .stdout.split('\n')
        .filter((line) => line.startsWith('{'));
    const limitedLines = () =>
      lines()
        .map((line) => JSON.parse(line))
        .filter((log) => log.msg === 'rate limited');
    // pino writes asynchronously: the line may follow the response.
    await waitFor(() => limitedLines().length > 0, 10_000, 'the rate limited log line');
    expect(limitedLines()).toEqual([
      expect.objectContaining({
        level: 20,
        tier: 'FREE',
        policy: 'free-minute',
        reqId: expect.any(String),
      }),
    ]);
    expect(lines().join('\n')).not.toContain('demo-free-key');
  });

  it('drains a request in flight on SIGTERM, then exits 0', async () => {
    const gateway = await startGateway();
    // The echo upstream holds this one for a second: SIGTERM arrives while it is in flight.
    const inFlight = fetch(`${gateway.url}/slow?delay=1000`, { headers: PRO });
    await new Promise((resolve) => setTimeout(resolve, 300));
    gateway.child.kill('SIGTERM');
    const response = await inFlight;
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ path: '/slow?delay=1000' });
    expect(await gateway.exited).toBe(0);
    expect(gateway.output().stderr).toBe('');
  });
});
