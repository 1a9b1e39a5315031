// envoyproxy/ratelimit's own integration configurations (basic.yaml, another.yaml and
// share_threshold.yaml), found under RUNTIME_ROOT as it finds them, and the answers its
// integration test expects of them, through the bin on real Redis. Where Sentinel differs (a
// refused request takes nothing from its other descriptors) the test says so.
import { copyFileSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { uniquePrefix } from '../harness/clients.ts';
import {
  awayFromMinuteEdge,
  type RlsClient,
  type RlsProcess,
  rlsClient,
  startRls,
} from './rls-process.ts';

const FIXTURES = new URL('fixtures/config/integration/', import.meta.url).pathname;
let rls: RlsProcess;
let client: RlsClient;

beforeAll(async () => {
  // RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, the last left to its default.
  const root = mkdtempSync(join(tmpdir(), 'sentinel-rls-runtime-'));
  const dir = join(root, 'ratelimit', 'config');
  mkdirSync(dir, { recursive: true });
  for (const file of ['basic.yaml', 'another.yaml', 'share-threshold.yaml']) {
    copyFileSync(join(FIXTURES, file), join(dir, file));
  }
  rls = await startRls([], {
    REDIS_URL: inject('redisUrl'),
    PREFIX: uniquePrefix('rls-upstream'),
    RUNTIME_ROOT: root,
    RUNTIME_SUBDIRECTORY: 'ratelimit',
  });
  client = rlsClient(rls.grpcPort);
});

afterAll(async () => {
  client?.close();
  await rls?.stop();
});

const one = (key: string, value: string) => [{ entries: [{ key, value }] }];
const unique = () => String(Math.floor(Math.random() * 1e12));

it('answers OK with no limit for a domain it does not know', async () => {
  const answer = await client.shouldRateLimit('foo', one('hello', 'world'), 1);
  expect(answer.overall_code).toBe('OK');
  expect(answer.statuses).toMatchObject([{ code: 'OK', current_limit: null, limit_remaining: 0 }]);
});

it("counts basic's key1 at 50 a second", async () => {
  const answer = await client.shouldRateLimit('basic', one('key1', unique()), 1);
  expect(answer.statuses).toMatchObject([
    {
      code: 'OK',
      current_limit: { requests_per_unit: 50, unit: 'SECOND' },
      limit_remaining: 49,
    },
  ]);
});

it("refuses another's key2 past 20 a minute", async () => {
  await awayFromMinuteEdge();
  const value = unique();
  for (let i = 0; i < 25; i++) {
    const answer = await client.shouldRateLimit('another', one('key2', value), 1);
    const over = i >= 20;
    expect(answer.overall_code).toBe(over ? 'OVER_LIMIT' : 'OK');
    expect(answer.statuses[0]).toMatchObject({
      code: over ? 'OVER_LIMIT' : 'OK',
      current_limit: { requests_per_unit: 20, unit: 'MINUTE' },
      limit_remaining: over ? 0 : 20 - (i + 1),
    });
  }
});

it('limits two keys of one domain together, and a refused request takes from neither', async () => {
  await awayFromMinuteEdge();
  const value = unique();
  const both = [{ entries: [{ key: 'key2', value }] }, { entries: [{ key: 'key3', value }] }];
  for (let i = 0; i < 15; i++) {
    const answer = await client.shouldRateLimit('another', both, 1);
    const over = i >= 10;
    expect(answer.overall_code).toBe(over ? 'OVER_LIMIT' : 'OK');
    // key2 stays at 10 left once key3 refuses: the reference service would go on counting it,
    // unless STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, whose answers these are.
    expect(answer.statuses).toMatchObject([
      {
        code: 'OK',
        current_limit: { requests_per_unit: 20, unit: 'MINUTE' },
        limit_remaining: over ? 10 : 20 - (i + 1),
      },
      {
        code: over ? 'OVER_LIMIT' : 'OK',
        current_limit: { requests_per_unit: 10, unit: 'HOUR' },
        limit_remaining: over ? 0 : 10 - (i + 1),
      },
    ]);
  }
});

it('shares one bucket among the values a share_threshold wildcard matches, and only there', async () => {
  const run = unique();
  const shared = [];
  for (let i = 0; i < 11; i++) {
    const answer = await client.shouldRateLimit(
      'share-threshold-test',
      one('files', `files/${run}/${i}`),
      1,
    );
    shared.push(answer.overall_code);
  }
  expect(shared).toEqual([...Array(10).fill('OK'), 'OVER_LIMIT']);
  const apart = [];
  for (let i = 0; i < 11; i++) {
    const value = `files_no_share/${run}/${i}`;
    apart.push(
      (await client.shouldRateLimit('share-threshold-test', one('files_no_share', value), 1))
        .overall_code,
    );
  }
  expect(apart).toEqual(Array(11).fill('OK'));
});
