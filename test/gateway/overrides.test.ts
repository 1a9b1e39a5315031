// A tenant's own limits from the gateway's keys file: applied in place of its tier, changed in
// the file without a restart, keeping what the tenant used; a bad override stops start-up.
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect, it } from 'vitest';
import { configFile, spawnGateway, startGateway } from './gateway-process.ts';

// A sliding log, not a fixed window: a fixed window aligned to the hour would forget what was
// used if the test ran across the hour, and the test asserts that it is kept.
const contract = (limit: number) =>
  JSON.stringify({
    'acme-key': {
      tenant: 'acme',
      tier: 'FREE',
      policies: { name: 'acme-contract', limit, window: '1h', algorithm: 'sliding-window-log' },
    },
  });

it("applies a key's own policies from the keys file, and a change to them without a restart", async () => {
  const file = configFile(
    'gateway.yaml',
    [
      'keysFile: keys.json',
      'keyCacheTtlMs: 100',
      'tiers:',
      '  FREE: { name: free, limit: 2, window: 1h }',
    ].join('\n'),
  );
  const keys = join(dirname(file), 'keys.json');
  writeFileSync(keys, contract(3));
  const { url } = await startGateway({}, ['--config', file]);
  const headers = { 'x-api-key': 'acme-key' };
  const statuses = async (times: number) => {
    const seen = [];
    for (let i = 0; i < times; i++) seen.push((await fetch(`${url}/orders`, { headers })).status);
    return seen;
  };
  // The contract's 3 an hour, not FREE's 2.
  expect(await statuses(4)).toEqual([200, 200, 200, 429]);
  const refused = await fetch(`${url}/orders`, { headers });
  expect(refused.headers.get('ratelimit-policy')).toBe('"acme-contract";q=3;w=3600');

  // The contract grows to 5: the file is read again, and the 3 used still count.
  writeFileSync(keys, contract(5));
  await sleep(2_500);
  expect(await statuses(3)).toEqual([200, 200, 429]);
});

it('stops start-up on a key whose own policies are bad, naming the entry and field', async () => {
  const file = configFile('gateway.yaml', 'keysFile: keys.json');
  writeFileSync(
    join(dirname(file), 'keys.json'),
    JSON.stringify({
      'acme-key': { tenant: 'acme', tier: 'FREE', policies: { limit: 0, window: '1h' } },
    }),
  );
  const gateway = spawnGateway({}, ['--config', file]);
  expect(await gateway.exited).toBe(1);
  expect(gateway.output().stderr).toMatch(
    /keys\.json: \(entry 1\) policies.*`policies\.limit` must be a positive integer/,
  );
  expect(gateway.output().stderr).not.toContain('acme-key');
});
