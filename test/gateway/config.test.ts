// The gateway's configuration file and environment: routes and keys from YAML, and mistakes named at start-up.
import { describe, expect, it } from 'vitest';
import { configFile, spawnGateway, startGateway } from './gateway-process.ts';

/** Runs the gateway on a bad configuration; resolves to its exit code and what it printed. */
async function refusedStart(env: Record<string, string>, args: readonly string[] = []) {
  const gateway = spawnGateway(env, args);
  const code = await gateway.exited;
  return { code, ...gateway.output() };
}

describe('the gateway configuration', () => {
  it('takes keys, tiers and route costs from a YAML file given with --config', async () => {
    const file = configFile(
      'gateway.yaml',
      [
        'tiers:',
        '  BASIC:',
        '    - { name: basic-minute, limit: 6, window: 1m }',
        'keys:',
        '  basic-key: BASIC',
        'routes:',
        '  - { path: /search, cost: 3, group: search }',
        'headers: draft-7',
      ].join('\n'),
    );
    const { url, output } = await startGateway({}, ['--config', file]);
    const headers = { 'x-api-key': 'basic-key' };
    const search = [];
    for (let i = 0; i < 3; i++) search.push((await fetch(`${url}/search?q=x`, { headers })).status);
    // 3 a search against 6 a minute; the search group's budget is apart from the rest.
    expect(search).toEqual([200, 200, 429]);
    const other = await fetch(`${url}/items`, { headers });
    expect(other.status).toBe(200);
    expect(other.headers.get('ratelimit')).toBe('limit=6, remaining=5, reset=10');
    // Keys were given: the demo keys are neither printed nor accepted.
    expect(output().stdout).not.toContain('demo-free-key');
    expect(
      (await fetch(`${url}/items`, { headers: { 'x-api-key': 'demo-free-key' } })).status,
    ).toBe(401);
  });

  it('starts without Redis on a file that sets `timeout`, the deadline of Redis calls alone', async () => {
    // The example configuration sets it; Sentinel refuses it beside the memory store.
    const file = configFile('gateway.yaml', 'timeout: 50\nonStoreError: deny\n');
    const { url } = await startGateway({}, ['--config', file]);
    const response = await fetch(`${url}/`, { headers: { 'x-api-key': 'demo-free-key' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('ratelimit')).toMatch(/^"free-minute";r=9;/);
  });

  it('lets the environment override the file: SENTINEL_HEADERS', async () => {
    const file = configFile('gateway.json', JSON.stringify({ headers: 'draft-7' }));
    const { url } = await startGateway({ SENTINEL_CONFIG: file, SENTINEL_HEADERS: 'legacy' });
    const response = await fetch(`${url}/`, { headers: { 'x-api-key': 'demo-free-key' } });
    expect(response.headers.get('x-ratelimit-limit')).toBe('10');
    expect(response.headers.get('ratelimit')).toBeNull();
  });

  it("stops with exit code 1 and Sentinel's message naming a bad tier limit, prefixed with the file", async () => {
    const file = configFile('gateway.yaml', 'tiers:\n  PRO:\n    - { limit: -1, window: 1m }\n');
    const { code, stderr, stdout } = await refusedStart({ SENTINEL_CONFIG: file });
    expect(code).toBe(1);
    expect(stderr.trim()).toMatch(
      new RegExp(`^${file}: @sentinel/core: .*tiers\\.PRO\\[0\\]\\.limit.*-1`),
    );
    expect(stderr).not.toMatch(/^\s+at /m);
    expect(stdout).not.toContain('listening');
  });

  it('stops with exit code 1 naming a bad gateway field: a negative port, a route without a path', async () => {
    // PORT set empty counts as unset, so the file's port applies.
    const port = await refusedStart({
      SENTINEL_CONFIG: configFile('a.yaml', 'port: -1\n'),
      PORT: '',
    });
    expect(port.code).toBe(1);
    expect(port.stderr.trim()).toMatch(
      /a\.yaml: port must be a port number from 0 to 65535, got -1$/,
    );

    const route = await refusedStart({
      SENTINEL_CONFIG: configFile('b.json', JSON.stringify({ routes: [{ cost: 2 }] })),
    });
    expect(route.code).toBe(1);
    expect(route.stderr).toMatch(/b\.json: routes\[0\]\.path must be a path prefix/);

    const typo = await refusedStart({ SENTINEL_CONFIG: configFile('c.yaml', 'prot: 80\n') });
    expect(typo.code).toBe(1);
    expect(typo.stderr).toMatch(/c\.yaml: prot is not a field/);

    const env = await refusedStart({ PORT: 'eighty' });
    expect(env.code).toBe(1);
    expect(env.stderr.trim()).toBe('PORT must be a port number from 0 to 65535, got "eighty"');
  });

  it('sheds load as its file says, and names a bad shed field', async () => {
    const file = configFile(
      'shed.yaml',
      'shed: { concurrency: 100, reserve: 0.1, criticalPaths: [/healthz, /admin] }\n',
    );
    const { url } = await startGateway({}, ['--config', file]);
    const response = await fetch(`${url}/items`, { headers: { 'x-api-key': 'demo-free-key' } });
    expect(response.status).toBe(200);

    const paths = await refusedStart({
      SENTINEL_CONFIG: configFile('d.yaml', 'shed: { concurrency: 10, criticalPaths: [health] }\n'),
    });
    expect(paths.code).toBe(1);
    expect(paths.stderr).toMatch(/d\.yaml: shed\.criticalPaths must be a list of paths/);
    const reserve = await refusedStart({
      SENTINEL_CONFIG: configFile('e.yaml', 'shed: { concurrency: 10, reserve: 2 }\n'),
    });
    expect(reserve.code).toBe(1);
    expect(reserve.stderr).toMatch(/e\.yaml: @sentinel\/core: .*shed\.reserve/);
  });

  it('names a key by its position, never the key, when its tier is unknown', async () => {
    const file = configFile('keys.yaml', 'keys:\n  secret-one: FREE\n  secret-two: GOLD\n');
    const { code, stderr } = await refusedStart({ SENTINEL_CONFIG: file });
    expect(code).toBe(1);
    expect(stderr).toMatch(
      /keys \(entry 2\) tier must be one of FREE, PRO, ENTERPRISE, got "GOLD"/,
    );
    expect(stderr).not.toContain('secret');
  });

  it('refuses a short admin token without quoting it, and a status page beyond loopback without a token', async () => {
    const short = await refusedStart({
      SENTINEL_CONFIG: configFile('admin.yaml', 'admin: { token: hunter2 }\n'),
    });
    expect(short.code).toBe(1);
    expect(short.stderr.trim()).toMatch(
      /admin\.yaml: admin\.token must be a string of at least 16 characters$/,
    );
    expect(short.stderr).not.toContain('hunter2');

    const fromEnv = await refusedStart({ SENTINEL_ADMIN_TOKEN: 'hunter2' });
    expect(fromEnv.stderr.trim()).toBe(
      'SENTINEL_ADMIN_TOKEN must be a string of at least 16 characters',
    );

    const exposed = await refusedStart({ HOST: '0.0.0.0', SENTINEL_STATUS_PAGE: '1' });
    expect(exposed.code).toBe(1);
    expect(exposed.stderr).toMatch(
      /^SENTINEL_STATUS_PAGE is on and 0\.0\.0\.0 is not a loopback address: set admin\.token/,
    );

    const typo = await refusedStart({
      SENTINEL_CONFIG: configFile('page.yaml', 'statusPage: yes please\n'),
    });
    expect(typo.stderr).toMatch(/page\.yaml: statusPage must be true or false/);
  });

  it('leaves the demo page off beyond loopback rather than refusing to start', async () => {
    const gateway = await startGateway({ HOST: '0.0.0.0' });
    expect(gateway.output().stdout).not.toContain('/_sentinel');
  });
});
