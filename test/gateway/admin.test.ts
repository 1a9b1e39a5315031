// The gateway's admin routes: an API key's quotas and their reset, behind the admin token, never limited or logged by key.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../harness/wait-for.ts';
import { configFile, startGateway } from './gateway-process.ts';

const TOKEN = 'test-admin-token-0123456789';
const ADMIN = { authorization: `Bearer ${TOKEN}` };
const FREE = { 'x-api-key': 'demo-free-key' };

interface Quota {
  identity: string;
  tier: string;
  policies: { policy: string; limit: number; remaining: number; resetMs: number }[];
  groups: Record<string, Quota['policies']>;
}

async function quota(url: string, key: string): Promise<Quota> {
  const response = await fetch(`${url}/_sentinel/identities/${encodeURIComponent(key)}`, {
    headers: ADMIN,
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Quota;
}

async function statuses(url: string, n: number, headers: Record<string, string>) {
  const answers = [];
  for (let i = 0; i < n; i++) answers.push((await fetch(`${url}/hello`, { headers })).status);
  return answers;
}

describe('the admin routes', () => {
  it('answer 401 problem+json without the token, with a wrong one, or with the wrong scheme', async () => {
    const { url } = await startGateway({ SENTINEL_ADMIN_TOKEN: TOKEN });
    const path = `${url}/_sentinel/identities/demo-free-key`;
    const attempts = [
      fetch(path),
      fetch(path, { headers: { authorization: 'Bearer wrong-token-0123456789' } }),
      fetch(path, { headers: { authorization: `Bearer ${TOKEN}x` } }),
      fetch(path, { headers: { authorization: TOKEN } }),
      fetch(path, { method: 'DELETE' }),
    ];
    for (const response of await Promise.all(attempts)) {
      expect(response.status).toBe(401);
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="Sentinel"');
      const body = await response.text();
      expect(JSON.parse(body)).toMatchObject({ status: 401, title: 'Unauthorized' });
      expect(body).not.toContain('demo-free-key');
    }
    // Refused admin calls spent nothing of the key's quota.
    expect((await quota(url, 'demo-free-key')).policies[0]?.remaining).toBe(10);
  });

  it("show a key's remaining quota dropping with its requests, and a reset admits it again", async () => {
    const { url } = await startGateway({ SENTINEL_ADMIN_TOKEN: TOKEN });
    const fresh = await quota(url, 'demo-free-key');
    expect(fresh).toEqual({
      identity: expect.stringMatching(/^[0-9a-f]{12}$/),
      tier: 'FREE',
      policies: [{ policy: 'free-minute', limit: 10, remaining: 10, resetMs: 0 }],
      groups: {},
    });
    expect(JSON.stringify(fresh)).not.toContain('demo-free-key');

    expect(await statuses(url, 3, FREE)).toEqual([200, 200, 200]);
    const after3 = await quota(url, 'demo-free-key');
    expect(after3.policies[0]?.remaining).toBe(7);
    expect(after3.policies[0]?.resetMs).toBeGreaterThan(0);

    expect(await statuses(url, 8, FREE)).toEqual([...Array(7).fill(200), 429]);
    expect((await quota(url, 'demo-free-key')).policies[0]?.remaining).toBe(0);

    const reset = await fetch(`${url}/_sentinel/identities/demo-free-key`, {
      method: 'DELETE',
      headers: ADMIN,
    });
    expect(reset.status).toBe(204);
    expect((await quota(url, 'demo-free-key')).policies[0]?.remaining).toBe(10);
    expect(await statuses(url, 1, FREE)).toEqual([200]);
  });

  it("show every policy of the key's tier, a route group's budget apart, and reset both", async () => {
    const file = configFile(
      'gateway.yaml',
      [
        'tiers:',
        '  PRO:',
        // Windows long enough that nothing refills while the test reads the quotas.
        '    - { name: pro-hour, limit: 100, window: 1h }',
        '    - { name: pro-burst, limit: 20, window: 10m, algorithm: gcra }',
        'keys:',
        '  pro-key-1: { tenant: globex, tier: PRO }',
        '  pro-key-2: { tenant: globex, tier: PRO }',
        'routes:',
        '  - { path: /export, cost: 10, group: export }',
        `admin: { token: ${TOKEN} }`,
      ].join('\n'),
    );
    const { url } = await startGateway({}, ['--config', file]);
    const headers = { 'x-api-key': 'pro-key-1' };
    expect((await fetch(`${url}/items`, { headers })).status).toBe(200);
    expect((await fetch(`${url}/export`, { headers })).status).toBe(200);
    // The tenant's other key shares its budget, so its quota shows the same spending.
    const shared = await quota(url, 'pro-key-2');
    expect(shared.tier).toBe('PRO');
    expect(shared.policies.map(({ policy, remaining }) => [policy, remaining])).toEqual([
      ['pro-hour', 99],
      ['pro-burst', 19],
    ]);
    expect(shared.groups.export?.map(({ policy, remaining }) => [policy, remaining])).toEqual([
      ['pro-hour', 90],
      ['pro-burst', 10],
    ]);
    expect((await quota(url, 'pro-key-1')).identity).toBe(shared.identity);

    const reset = await fetch(`${url}/_sentinel/identities/pro-key-1`, {
      method: 'DELETE',
      headers: ADMIN,
    });
    expect(reset.status).toBe(204);
    const after = await quota(url, 'pro-key-2');
    expect(after.policies.map(({ remaining }) => remaining)).toEqual([100, 20]);
    expect(after.groups.export?.map(({ remaining }) => remaining)).toEqual([100, 20]);
  });

  it('answer 404 for a key nobody issued, and are never limited', async () => {
    const { url } = await startGateway({ SENTINEL_ADMIN_TOKEN: TOKEN });
    for (const method of ['GET', 'DELETE']) {
      const response = await fetch(`${url}/_sentinel/identities/made-up-key`, {
        method,
        headers: ADMIN,
      });
      expect(response.status).toBe(404);
      expect(await response.text()).not.toContain('made-up-key');
    }
    // Past FREE's limit and more: an operator's calls count against nobody's quota.
    for (let i = 0; i < 15; i++) {
      const response = await fetch(`${url}/_sentinel/identities/demo-free-key`, {
        headers: { ...ADMIN, ...FREE },
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('ratelimit')).toBeNull();
    }
  });

  it('read through the limiters requests count with, yet add no decisions to the metrics', async () => {
    const { url } = await startGateway({ SENTINEL_ADMIN_TOKEN: TOKEN });
    expect(await statuses(url, 2, FREE)).toEqual([200, 200]);
    for (let i = 0; i < 3; i++) {
      expect((await quota(url, 'demo-free-key')).policies[0]?.remaining).toBe(8);
    }
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain(
      'sentinel_decisions_total{tier="FREE",policy="free-minute",outcome="allowed"} 2',
    );
    expect(metrics).toMatch(/^sentinel_store_duration_seconds_count 2$/m);
  });

  it('are off without a token: the path is the upstream’s like any other', async () => {
    const { url } = await startGateway();
    const response = await fetch(`${url}/_sentinel/identities/demo-free-key`, {
      headers: { ...ADMIN, ...FREE },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ upstream: 'echo', tier: 'FREE' });
  });

  it('keep the key out of the request log lines', async () => {
    const file = configFile(
      'gateway.json',
      JSON.stringify({ keys: { 'very-secret-key-42': 'FREE' }, admin: { token: TOKEN } }),
    );
    const gateway = await startGateway({ LOG_LEVEL: 'info' }, ['--config', file]);
    await quota(gateway.url, 'very-secret-key-42');
    await fetch(`${gateway.url}/_sentinel/identities/very-secret-key-42`, { method: 'DELETE' });
    const lines = () => gateway.output().stdout.split('\n');
    // pino writes asynchronously: the lines may follow the responses.
    await waitFor(
      () => lines().filter((line) => line.includes('/_sentinel/identities/[key]')).length >= 2,
      10_000,
      'the admin requests in the log',
    );
    expect(gateway.output().stdout).not.toContain('very-secret-key-42');
    expect(gateway.output().stdout).not.toContain(TOKEN);
  });
});
