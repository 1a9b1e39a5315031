// sentinel-rls's statistics: upstream's counting rules per descriptor, and the exposition text.
import { type DescriptorOutcome, RlsMetrics } from '@sentinel/rls';
import { describe, expect, it } from 'vitest';
import { parseExposition } from './exposition.ts';

const STATS = ['total_hits', 'over_limit', 'near_limit', 'within_limit', 'shadow_mode'] as const;
type Stat = (typeof STATS)[number];

/** Each per-limit statistic of one series, found by its labels. */
function counts(metrics: RlsMetrics, labels: Record<string, string>): Record<Stat, number> {
  const samples = parseExposition(metrics.render());
  const found = {} as Record<Stat, number>;
  for (const stat of STATS) {
    const sample = samples.find(
      (s) =>
        s.name === `ratelimit_service_rate_limit_${stat}` &&
        JSON.stringify(s.labels) === JSON.stringify(labels),
    );
    if (sample === undefined) throw new Error(`no ${stat} for ${JSON.stringify(labels)}`);
    found[stat] = sample.value;
  }
  return found;
}

function outcome(overrides: Partial<DescriptorOutcome>): DescriptorOutcome {
  return { hits: 1, limit: 10, remaining: 9, overLimit: false, shadowMode: false, ...overrides };
}

const KEY = 'api.path_/login';
const LABELS = { domain: 'api', key1: 'path_/login' };

describe('counting as envoyproxy/ratelimit counts', () => {
  it('counts every hit, the last 20% as near the limit, and the refused ones as over it', () => {
    const metrics = new RlsMetrics();
    for (let remaining = 9; remaining >= 0; remaining--) {
      metrics.record(KEY, outcome({ remaining }));
    }
    expect(counts(metrics, LABELS)).toEqual({
      total_hits: 10,
      over_limit: 0,
      near_limit: 2,
      within_limit: 10,
      shadow_mode: 0,
    });
    metrics.record(KEY, outcome({ remaining: 0, overLimit: true }));
    expect(counts(metrics, LABELS)).toMatchObject({ total_hits: 11, over_limit: 1, near_limit: 2 });
  });

  it('splits a hits_addend across the thresholds it crosses', () => {
    const metrics = new RlsMetrics();
    // 0 → 5: within; 5 → 9: one hit past the threshold of 8.
    metrics.record(KEY, outcome({ hits: 5, remaining: 5 }));
    metrics.record(KEY, outcome({ hits: 4, remaining: 1 }));
    expect(counts(metrics, LABELS)).toEqual({
      total_hits: 9,
      over_limit: 0,
      near_limit: 1,
      within_limit: 9,
      shadow_mode: 0,
    });
    // 9 → 12, refused: two hits over the limit, and the one from 9 to 10 near it.
    metrics.record(KEY, outcome({ hits: 3, remaining: 1, overLimit: true }));
    expect(counts(metrics, LABELS)).toEqual({
      total_hits: 12,
      over_limit: 2,
      near_limit: 2,
      within_limit: 9,
      shadow_mode: 0,
    });
  });

  it('counts all of a hits_addend near the limit once the count was past the threshold', () => {
    const metrics = new RlsMetrics();
    metrics.record(KEY, outcome({ hits: 8, remaining: 2 }));
    metrics.record(KEY, outcome({ hits: 2, remaining: 0 }));
    expect(counts(metrics, LABELS)).toMatchObject({ near_limit: 2, within_limit: 10 });
  });

  it('counts a refusal that starts under the threshold as near from the threshold up', () => {
    const metrics = new RlsMetrics();
    // 2 → 14 on a limit of 10: 4 over, and the 2 from 8 to 10 near.
    metrics.record(KEY, outcome({ hits: 12, remaining: 8, overLimit: true }));
    expect(counts(metrics, LABELS)).toEqual({
      total_hits: 12,
      over_limit: 4,
      near_limit: 2,
      within_limit: 0,
      shadow_mode: 0,
    });
  });

  it('counts shadow_mode as the hits over the limit, over_limit as well', () => {
    const metrics = new RlsMetrics();
    const limit = { limit: 2, shadowMode: true, overLimit: true };
    metrics.record(KEY, outcome({ ...limit, hits: 1, remaining: 0 }));
    metrics.record(KEY, outcome({ ...limit, hits: 3, remaining: 1 }));
    expect(counts(metrics, LABELS)).toEqual({
      total_hits: 4,
      over_limit: 3,
      near_limit: 1,
      within_limit: 0,
      shadow_mode: 3,
    });
  });

  it('counts nothing in shadow_mode for a shadow limit within its limit', () => {
    const metrics = new RlsMetrics();
    metrics.record(KEY, outcome({ shadowMode: true }));
    expect(counts(metrics, LABELS)).toMatchObject({ within_limit: 1, shadow_mode: 0 });
  });

  it('counts a hits_addend of 0 in no statistic', () => {
    const metrics = new RlsMetrics();
    metrics.record(KEY, outcome({ hits: 0, remaining: 1 }));
    metrics.record(KEY, outcome({ hits: 0, remaining: 0, overLimit: true }));
    expect(counts(metrics, LABELS)).toEqual({
      total_hits: 0,
      over_limit: 0,
      near_limit: 0,
      within_limit: 0,
      shadow_mode: 0,
    });
  });

  it('takes NEAR_LIMIT_RATIO in float32, as upstream does', () => {
    // float32(100 × 0.29) is 29; in float64 the threshold would be 28.
    const metrics = new RlsMetrics({ nearLimitRatio: 0.29 });
    metrics.record(KEY, outcome({ hits: 29, limit: 100, remaining: 71 }));
    expect(counts(metrics, LABELS).near_limit).toBe(0);
    metrics.record(KEY, outcome({ limit: 100, remaining: 70 }));
    expect(counts(metrics, LABELS).near_limit).toBe(1);
  });

  it('counts nothing near the limit with a ratio of 1', () => {
    const metrics = new RlsMetrics({ nearLimitRatio: 1 });
    metrics.record(KEY, outcome({ remaining: 0 }));
    expect(counts(metrics, LABELS)).toMatchObject({ near_limit: 0, within_limit: 1 });
  });

  it('counts the failure mode, malformed requests and global shadow mode apart', () => {
    const metrics = new RlsMetrics();
    metrics.storeError();
    metrics.storeError();
    metrics.serviceError();
    metrics.globalShadowMode();
    const samples = parseExposition(metrics.render());
    const value = (name: string) => samples.find((s) => s.name === name)?.value;
    expect(value('sentinel_rls_store_errors_total')).toBe(2);
    expect(value('ratelimit_service_should_rate_limit_error')).toBe(1);
    expect(value('ratelimit_service_global_shadow_mode')).toBe(1);
  });

  it('refuses a ratio outside 0 to 1 and a bound that is not a positive integer', () => {
    expect(() => new RlsMetrics({ nearLimitRatio: 1.2 })).toThrow(/nearLimitRatio/);
    expect(() => new RlsMetrics({ nearLimitRatio: Number.NaN })).toThrow(/nearLimitRatio/);
    expect(() => new RlsMetrics({ maxSeries: 0 })).toThrow(/maxSeries/);
  });
});

describe('the exposition text', () => {
  it("labels each series as upstream's Prometheus mapping does: domain, key1, key2", () => {
    const metrics = new RlsMetrics();
    metrics.record('messaging.message_type_marketing.to_number', outcome({}));
    metrics.record('messaging.auth-service', outcome({}));
    const samples = parseExposition(metrics.render()).filter(
      (s) => s.name === 'ratelimit_service_rate_limit_total_hits',
    );
    expect(samples.map((s) => s.labels)).toEqual([
      { domain: 'messaging', key1: 'message_type_marketing', key2: 'to_number' },
      { domain: 'messaging', key1: 'auth-service' },
    ]);
  });

  it('adds up keys deeper than key2 in the series of their first three parts', () => {
    const metrics = new RlsMetrics();
    metrics.record('d.a_1.b_2.c_3', outcome({}));
    metrics.record('d.a_1.b_2.c_4', outcome({}));
    expect(counts(metrics, { domain: 'd', key1: 'a_1', key2: 'b_2' }).total_hits).toBe(2);
  });

  it("sanitizes as upstream's stat names: colons, pipes and IPv4 dots become underscores", () => {
    const metrics = new RlsMetrics();
    metrics.record('edge.remote_address_10.0.0.1', outcome({}));
    metrics.record('edge.header_a:b|c', outcome({}));
    expect(counts(metrics, { domain: 'edge', key1: 'remote_address_10_0_0_1' }).total_hits).toBe(1);
    expect(counts(metrics, { domain: 'edge', key1: 'header_a_b_c' }).total_hits).toBe(1);
  });

  it('escapes quotes, backslashes and line feeds in label values', () => {
    const metrics = new RlsMetrics();
    const value = 'user_a"b\\c\nd';
    metrics.record(`api.${value}`, outcome({}));
    const text = metrics.render();
    expect(text).toContain('key1="user_a\\"b\\\\c\\nd"');
    expect(counts(metrics, { domain: 'api', key1: value }).total_hits).toBe(1);
  });

  it('opens each family with HELP and TYPE, once', () => {
    const metrics = new RlsMetrics();
    metrics.record(KEY, outcome({}));
    metrics.record('other.key_value', outcome({}));
    metrics.request('ShouldRateLimit', 0.002);
    const text = metrics.render();
    parseExposition(text);
    for (const family of [
      ...STATS.map((stat) => `ratelimit_service_rate_limit_${stat}`),
      'ratelimit_service_total_requests',
      'ratelimit_service_response_time_seconds',
      'sentinel_rls_store_errors_total',
    ]) {
      expect(text.split('\n').filter((line) => line.startsWith(`# TYPE ${family} `))).toHaveLength(
        1,
      );
    }
  });

  it('counts requests by method, and times them in a cumulative histogram', () => {
    const metrics = new RlsMetrics();
    metrics.request('ShouldRateLimit', 0.0004);
    metrics.request('ShouldRateLimit', 0.003);
    metrics.request('ShouldRateLimit', 7);
    metrics.request('json', 0.02);
    const samples = parseExposition(metrics.render());
    const find = (name: string, labels: Record<string, string>) =>
      samples.find((s) => s.name === name && JSON.stringify(s.labels) === JSON.stringify(labels))
        ?.value;
    const grpc = { grpc_method: 'ShouldRateLimit' };
    expect(find('ratelimit_service_total_requests', grpc)).toBe(3);
    expect(find('ratelimit_service_total_requests', { grpc_method: 'json' })).toBe(1);
    const bucket = (le: string) =>
      find('ratelimit_service_response_time_seconds_bucket', { ...grpc, le });
    expect(bucket('0.0005')).toBe(1);
    expect(bucket('0.0025')).toBe(1);
    expect(bucket('0.005')).toBe(2);
    expect(bucket('2.5')).toBe(2);
    expect(bucket('+Inf')).toBe(3);
    expect(find('ratelimit_service_response_time_seconds_count', grpc)).toBe(3);
    expect(find('ratelimit_service_response_time_seconds_sum', grpc)).toBeCloseTo(7.0034, 10);
  });
});

describe('the bound on series', () => {
  it('counts the stat keys past the bound under one overflow series', () => {
    const metrics = new RlsMetrics({ maxSeries: 3 });
    for (let i = 0; i < 5; i++) metrics.record(`d.k_${i}`, outcome({ hits: i + 1 }));
    // A series that exists keeps its own count past the bound.
    metrics.record('d.k_0', outcome({}));
    const hits = parseExposition(metrics.render()).filter(
      (s) => s.name === 'ratelimit_service_rate_limit_total_hits',
    );
    expect(hits.map((s) => [s.labels, s.value])).toEqual([
      [{ domain: 'd', key1: 'k_0' }, 2],
      [{ domain: 'd', key1: 'k_1' }, 2],
      [{ domain: 'd', key1: 'k_2' }, 3],
      [{ overflow: 'true' }, 4 + 5],
    ]);
  });

  it('keeps the text to 10,000 series by default, whatever callers send', () => {
    const metrics = new RlsMetrics();
    for (let i = 0; i < 12_000; i++) metrics.record(`d.user_${i}`, outcome({}));
    // Read by line, not by the strict reader: 60,000 samples would make it the slow part.
    const hits = metrics
      .render()
      .split('\n')
      .filter((line) => line.startsWith('ratelimit_service_rate_limit_total_hits{'));
    expect(hits).toHaveLength(10_001);
    expect(hits.at(-2)).toBe(
      'ratelimit_service_rate_limit_total_hits{domain="d",key1="user_9999"} 1',
    );
    expect(hits.at(-1)).toBe('ratelimit_service_rate_limit_total_hits{overflow="true"} 2000');
  });

  it('cuts a label short, so that values as long as headers cannot fill memory', () => {
    const metrics = new RlsMetrics();
    const long = 'x'.repeat(60_000);
    metrics.record(`d.user_${long}.path_${long}`, outcome({}));
    const [line] = metrics
      .render()
      .split('\n')
      .filter((l) => l.startsWith('ratelimit_service_rate_limit_total_hits{'));
    expect(line).toBe(
      `ratelimit_service_rate_limit_total_hits{domain="d",key1="user_${'x'.repeat(251)}",key2="path_${'x'.repeat(251)}"} 1`,
    );
  });
});
