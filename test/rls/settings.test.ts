// sentinel-rls's settings: upstream's variables and defaults, Sentinel's own, argv, and every refusal.
import { HELP, ignoredVariables, readSettings, SettingsError } from '@sentinel/rls';
import { describe, expect, it } from 'vitest';

function settings(env: NodeJS.ProcessEnv, argv: readonly string[] = []) {
  return readSettings(env, argv);
}

function refusal(env: NodeJS.ProcessEnv, argv: readonly string[] = []): SettingsError {
  try {
    readSettings(env, argv);
  } catch (error) {
    expect(error).toBeInstanceOf(SettingsError);
    return error as SettingsError;
  }
  throw new Error('the settings were accepted');
}

/** The URLs REDIS_URL gives under REDIS_TYPE single or cluster. */
function urls(env: NodeJS.ProcessEnv): readonly string[] {
  const { redis } = settings(env);
  if (redis === undefined || redis.type === 'sentinel') throw new Error(`no URLs: ${redis?.type}`);
  return redis.urls;
}

describe('readSettings', () => {
  it('takes upstream defaults, and keeps limits in memory without REDIS_URL', () => {
    const env = {};
    expect(settings(env)).toEqual({
      grpcHost: '0.0.0.0',
      grpcPort: 8081,
      host: '0.0.0.0',
      port: 8080,
      redis: undefined,
      redisTimeoutMs: 50,
      prefix: 'sentinel',
      failureMode: 'open',
      shadowMode: false,
      nearLimitRatio: 0.8,
      mergeDomainConfig: false,
      limitResponseHeadersEnabled: false,
      responseHeaders: 'draft',
      legacyHeaderNames: {
        limit: 'RateLimit-Limit',
        remaining: 'RateLimit-Remaining',
        reset: 'RateLimit-Reset',
      },
      logLevel: 'warn',
      tracing: {
        enabled: false,
        protocol: 'http',
        serviceName: 'RateLimit',
        serviceNamespace: undefined,
        serviceInstanceId: undefined,
        samplingRate: 1,
      },
      metricsExport: {
        enabled: false,
        protocol: 'http/protobuf',
        intervalMs: 60_000,
        timeoutMs: 30_000,
      },
      configFiles: [],
      help: false,
      env,
    });
  });

  it('reads every variable', () => {
    const s = settings({
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '9001',
      HOST: '::',
      PORT: '0',
      REDIS_URL: 'redis.internal:6380',
      REDIS_TIMEOUT_MS: '120',
      PREFIX: 'rls',
      FAILURE_MODE: 'Closed',
      SHADOW_MODE: 'true',
      NEAR_LIMIT_RATIO: '0.5',
      MERGE_DOMAIN_CONFIG: '1',
      LIMIT_RESPONSE_HEADERS_ENABLED: 'T',
      RESPONSE_HEADERS: 'LEGACY',
      LIMIT_LIMIT_HEADER: 'X-Limit',
      LIMIT_REMAINING_HEADER: 'X-Remaining',
      LIMIT_RESET_HEADER: 'X-Reset',
      LOG_LEVEL: 'DEBUG',
    });
    expect(s).toMatchObject({
      grpcHost: '127.0.0.1',
      grpcPort: 9001,
      host: '::',
      port: 0,
      redis: { type: 'single', urls: ['redis://redis.internal:6380'] },
      redisTimeoutMs: 120,
      prefix: 'rls',
      failureMode: 'closed',
      shadowMode: true,
      nearLimitRatio: 0.5,
      mergeDomainConfig: true,
      limitResponseHeadersEnabled: true,
      responseHeaders: 'legacy',
      legacyHeaderNames: { limit: 'X-Limit', remaining: 'X-Remaining', reset: 'X-Reset' },
      logLevel: 'debug',
    });
  });

  it('passes the environment through for the variables other parts read', () => {
    const env = { RUNTIME_ROOT: '/srv/rl', RUNTIME_SUBDIRECTORY: 'ratelimit' };
    expect(settings(env).env).toBe(env);
  });

  it('reads an empty variable as unset', () => {
    expect(settings({ PORT: '', REDIS_URL: '', SHADOW_MODE: '' })).toMatchObject({
      port: 8080,
      redis: undefined,
      shadowMode: false,
    });
  });

  it.each([
    ['1', true],
    ['t', true],
    ['T', true],
    ['TRUE', true],
    ['true', true],
    ['True', true],
    ['0', false],
    ['f', false],
    ['F', false],
    ['FALSE', false],
    ['false', false],
    ['False', false],
  ])('reads the boolean %s as Go does: %s', (value, expected) => {
    expect(settings({ SHADOW_MODE: value }).shadowMode).toBe(expected);
  });

  it.each(['yes', 'on', 'tRUE', '2', ' true'])('refuses the boolean %j', (value) => {
    expect(refusal({ MERGE_DOMAIN_CONFIG: value }).message).toBe(
      `MERGE_DOMAIN_CONFIG: must be true or false (or 1, 0, t, f), got ${JSON.stringify(value)}`,
    );
  });

  it.each([
    ['warning', 'warn'],
    ['Info', 'info'],
    ['ERROR', 'error'],
    ['trace', 'trace'],
  ])('reads LOG_LEVEL %s as %s', (value, expected) => {
    expect(settings({ LOG_LEVEL: value }).logLevel).toBe(expected);
  });

  it('reads FAILURE_MODE error', () => {
    expect(settings({ FAILURE_MODE: 'error' }).failureMode).toBe('error');
  });

  it('accepts a NEAR_LIMIT_RATIO of 0, 1 and .9', () => {
    expect(settings({ NEAR_LIMIT_RATIO: '0' }).nearLimitRatio).toBe(0);
    expect(settings({ NEAR_LIMIT_RATIO: '1' }).nearLimitRatio).toBe(1);
    expect(settings({ NEAR_LIMIT_RATIO: '.9' }).nearLimitRatio).toBe(0.9);
  });
});

describe('readSettings: REDIS_URL', () => {
  it("turns upstream's host:port into a redis:// URL", () => {
    expect(settings({ REDIS_URL: 'localhost:6379' }).redis).toEqual({
      type: 'single',
      urls: ['redis://localhost:6379'],
    });
    expect(urls({ REDIS_URL: '[::1]:6379' })).toEqual(['redis://[::1]:6379']);
  });

  it('keeps a redis:// or rediss:// URL as written', () => {
    expect(urls({ REDIS_URL: 'redis://u:p@cache:6379/2' })).toEqual(['redis://u:p@cache:6379/2']);
    expect(urls({ REDIS_URL: 'rediss://cache.example.com' })).toEqual([
      'rediss://cache.example.com',
    ]);
  });

  it('reads REDIS_TYPE cluster, in any case, with a comma-separated list of either form', () => {
    expect(
      settings({ REDIS_TYPE: 'CLUSTER', REDIS_URL: 'n1:7000, redis://n2:7001,n3:7002' }).redis,
    ).toEqual({
      type: 'cluster',
      urls: ['redis://n1:7000', 'redis://n2:7001', 'redis://n3:7002'],
    });
  });

  it('keeps REDIS_TYPE cluster with a single seed a cluster', () => {
    expect(settings({ REDIS_TYPE: 'cluster', REDIS_URL: 'n1:7000' }).redis).toEqual({
      type: 'cluster',
      urls: ['redis://n1:7000'],
    });
  });

  it('folds REDIS_AUTH into every URL: a password, or user:password split at the first colon', () => {
    expect(urls({ REDIS_URL: 'cache:6379', REDIS_AUTH: 's3cret' })).toEqual([
      'redis://:s3cret@cache:6379',
    ]);
    const cluster = urls({
      REDIS_TYPE: 'cluster',
      REDIS_URL: 'n1:7000,n2:7000',
      REDIS_AUTH: 'app:p@ss:w%rd/1',
    });
    expect(cluster).toHaveLength(2);
    for (const url of cluster) {
      const parsed = new URL(url);
      expect(decodeURIComponent(parsed.username)).toBe('app');
      expect(decodeURIComponent(parsed.password)).toBe('p@ss:w%rd/1');
    }
  });

  it('connects host:port with TLS under REDIS_TLS', () => {
    expect(urls({ REDIS_URL: 'cache:6379', REDIS_TLS: 'true' })).toEqual(['rediss://cache:6379']);
  });
});

describe('readSettings: REDIS_TYPE sentinel', () => {
  it("reads upstream's form: the master name, then each sentinel's host:port", () => {
    expect(
      settings({
        REDIS_TYPE: 'Sentinel',
        REDIS_URL: 'mymaster,10.0.0.1:26379, sentinel-2.internal:26380,[::1]:26381',
      }).redis,
    ).toEqual({
      type: 'sentinel',
      masterName: 'mymaster',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: 'sentinel-2.internal', port: 26380 },
        { host: '::1', port: 26381 },
      ],
      sentinelAuth: undefined,
      auth: undefined,
      tls: false,
    });
  });

  it('keeps REDIS_AUTH for the master and REDIS_SENTINEL_AUTH for the sentinels, each split at the first colon', () => {
    expect(
      settings({
        REDIS_TYPE: 'sentinel',
        REDIS_URL: 'mymaster,s1:26379',
        REDIS_AUTH: 'app:p@ss:w%rd',
        REDIS_SENTINEL_AUTH: 's3cret',
      }).redis,
    ).toMatchObject({
      auth: { username: 'app', password: 'p@ss:w%rd' },
      sentinelAuth: { password: 's3cret' },
    });
    expect(
      settings({
        REDIS_TYPE: 'sentinel',
        REDIS_URL: 'mymaster,s1:26379',
        REDIS_SENTINEL_AUTH: 'watcher:s3cret',
      }).redis,
    ).toMatchObject({ auth: undefined, sentinelAuth: { username: 'watcher', password: 's3cret' } });
  });

  it('connects to the sentinels and the master with TLS under REDIS_TLS', () => {
    expect(
      settings({ REDIS_TYPE: 'sentinel', REDIS_URL: 'mymaster,s1:26379', REDIS_TLS: 'true' }).redis,
    ).toMatchObject({ type: 'sentinel', tls: true });
  });

  it.each([
    [
      'mymaster',
      'REDIS_URL: under REDIS_TYPE=sentinel must list the master name, then each sentinel as host:port (mymaster,10.0.0.1:26379), got "mymaster"',
    ],
    [
      's1:26379,s2:26379',
      'REDIS_URL: under REDIS_TYPE=sentinel starts with the master name, not an address: list the master name, then each sentinel as host:port (mymaster,10.0.0.1:26379), got "s1:26379,s2:26379"',
    ],
    [
      'redis://s1:26379,s2:26379',
      'REDIS_URL: under REDIS_TYPE=sentinel starts with the master name, not an address: list the master name, then each sentinel as host:port (mymaster,10.0.0.1:26379), got "redis://s1:26379,s2:26379"',
    ],
    [
      'mymaster,s1',
      'REDIS_URL: names each sentinel as host:port (its password goes in REDIS_SENTINEL_AUTH, TLS in REDIS_TLS), got "s1"',
    ],
    [
      'mymaster,redis://:hunter2@s1:26379',
      'REDIS_URL: names each sentinel as host:port (its password goes in REDIS_SENTINEL_AUTH, TLS in REDIS_TLS), got "redis://*****@s1:26379"',
    ],
    ['mymaster,s1:0', 'REDIS_URL: has no valid port in "s1:0"'],
    ['mymaster,s1:26379,', 'REDIS_URL: has an empty entry in "mymaster,s1:26379,"'],
  ])('refuses REDIS_URL %j', (url, message) => {
    const error = refusal({ REDIS_TYPE: 'sentinel', REDIS_URL: url });
    expect(error.message).toBe(message);
    expect(error.setting).toBe('REDIS_URL');
  });

  it.each([
    [
      { REDIS_TYPE: 'sentinel' },
      'REDIS_TYPE: is set but REDIS_URL is not; without REDIS_URL the limits are kept in memory',
    ],
    [
      { REDIS_SENTINEL_AUTH: 'pw' },
      'REDIS_SENTINEL_AUTH: is set but REDIS_URL is not; without REDIS_URL the limits are kept in memory',
    ],
    [
      { REDIS_URL: 'cache:6379', REDIS_SENTINEL_AUTH: 'pw' },
      "REDIS_SENTINEL_AUTH: is the sentinels' password, and REDIS_TYPE is single, not sentinel; REDIS_AUTH is the servers'",
    ],
    [
      { REDIS_TYPE: 'cluster', REDIS_URL: 'n1:7000', REDIS_SENTINEL_AUTH: 'pw' },
      "REDIS_SENTINEL_AUTH: is the sentinels' password, and REDIS_TYPE is cluster, not sentinel; REDIS_AUTH is the servers'",
    ],
  ])('refuses %j', (env, message) => {
    const error = refusal(env);
    expect(error.message).toBe(message);
    expect(error.setting).toBe(message.slice(0, message.indexOf(':')));
  });
});

describe('readSettings: arguments', () => {
  it('collects every --config in order, in both spellings', () => {
    expect(
      settings({}, ['--config', 'a.yaml', '--config=b.yaml', '--config', 'c.yaml']).configFiles,
    ).toEqual(['a.yaml', 'b.yaml', 'c.yaml']);
  });

  it('reads --help and -h, and leaves a broken environment for the help to explain', () => {
    expect(settings({}, ['--help']).help).toBe(true);
    const s = settings({ GRPC_PORT: 'abc' }, ['-h']);
    expect(s).toMatchObject({ help: true, grpcPort: 8081 });
  });

  it('lists every variable with its default in HELP', () => {
    for (const name of [
      'GRPC_HOST',
      'GRPC_PORT',
      'HOST',
      'PORT',
      'REDIS_URL',
      'REDIS_TYPE',
      'REDIS_AUTH',
      'REDIS_SENTINEL_AUTH',
      'REDIS_TLS',
      'SHADOW_MODE',
      'LIMIT_RESPONSE_HEADERS_ENABLED',
      'LIMIT_LIMIT_HEADER',
      'LIMIT_REMAINING_HEADER',
      'LIMIT_RESET_HEADER',
      'LOG_LEVEL',
      'NEAR_LIMIT_RATIO',
      'MERGE_DOMAIN_CONFIG',
      'RESPONSE_HEADERS',
      'REDIS_TIMEOUT_MS',
      'FAILURE_MODE',
      'PREFIX',
      'RUNTIME_ROOT',
      'RUNTIME_SUBDIRECTORY',
      'RUNTIME_APPDIRECTORY',
      'RUNTIME_IGNOREDOTFILES',
      'TRACING_ENABLED',
      'TRACING_EXPORTER_PROTOCOL',
      'TRACING_SERVICE_NAME',
      'TRACING_SERVICE_NAMESPACE',
      'TRACING_SERVICE_INSTANCE_ID',
      'TRACING_SAMPLING_RATE',
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      '--config',
      '--help',
    ]) {
      expect(HELP).toMatch(new RegExp(`^  ${name}\\b`, 'm'));
    }
    for (const fallback of ['8081', '8080', '0.0.0.0', '50', '0.8', 'warn', 'sentinel']) {
      expect(HELP).toContain(`Default ${fallback}`);
    }
  });
});

describe('readSettings: refusals name the variable and the value', () => {
  it.each([
    [{ GRPC_PORT: 'abc' }, 'GRPC_PORT: must be a port number, got "abc"'],
    [{ PORT: '65536' }, 'PORT: must be a port number, got "65536"'],
    [{ PORT: '-1' }, 'PORT: must be a port number, got "-1"'],
    [{ PORT: '80.5' }, 'PORT: must be a port number, got "80.5"'],
    [
      { REDIS_TIMEOUT_MS: '0' },
      'REDIS_TIMEOUT_MS: must be a whole number of milliseconds, 1 or more, got "0"',
    ],
    [
      { REDIS_TIMEOUT_MS: '50ms' },
      'REDIS_TIMEOUT_MS: must be a whole number of milliseconds, 1 or more, got "50ms"',
    ],
    [{ NEAR_LIMIT_RATIO: '1.5' }, 'NEAR_LIMIT_RATIO: must be a number from 0 to 1, got "1.5"'],
    [{ NEAR_LIMIT_RATIO: '-0.1' }, 'NEAR_LIMIT_RATIO: must be a number from 0 to 1, got "-0.1"'],
    [{ NEAR_LIMIT_RATIO: 'abc' }, 'NEAR_LIMIT_RATIO: must be a number from 0 to 1, got "abc"'],
    [
      { FAILURE_MODE: 'fail-open' },
      'FAILURE_MODE: must be one of open, closed, error, got "fail-open"',
    ],
    [
      { RESPONSE_HEADERS: 'draft-7' },
      'RESPONSE_HEADERS: must be one of draft, legacy, got "draft-7"',
    ],
    [
      { LOG_LEVEL: 'verbose' },
      'LOG_LEVEL: must be one of trace, debug, info, warn, error, fatal, panic, got "verbose"',
    ],
    [
      { PREFIX: 'rl{a}' },
      `PREFIX: must not hold { or }, which would break the keys' hash tag, got "rl{a}"`,
    ],
    [
      { LIMIT_RESET_HEADER: 'Reset Time' },
      'LIMIT_RESET_HEADER: must be an HTTP header name, got "Reset Time"',
    ],
    [
      { REDIS_TYPE: 'replicated', REDIS_URL: 'cache:6379' },
      'REDIS_TYPE: must be one of single, cluster, sentinel, got "replicated"',
    ],
    [
      { REDIS_URL: 'cache' },
      'REDIS_URL: must be host:port or a redis:// or rediss:// URL, got "cache"',
    ],
    [
      { REDIS_URL: 'http://cache:6379' },
      'REDIS_URL: must be host:port or a redis:// or rediss:// URL, got "http://cache:6379"',
    ],
    [{ REDIS_URL: 'cache:0' }, 'REDIS_URL: has no valid port in "cache:0"'],
    [{ REDIS_URL: 'cache:70000' }, 'REDIS_URL: has no valid port in "cache:70000"'],
    [
      { REDIS_URL: '/var/run/nutcracker/ratelimit.sock' },
      'REDIS_URL: names a unix socket, which sentinel-rls does not support: give host:port or a redis:// URL, got "/var/run/nutcracker/ratelimit.sock"',
    ],
    [
      { REDIS_URL: 'n1:7000,n2:7000' },
      'REDIS_URL: is a list, which needs REDIS_TYPE=cluster, got "n1:7000,n2:7000"',
    ],
    [
      { REDIS_TYPE: 'cluster', REDIS_URL: 'n1:7000,,n2:7000' },
      'REDIS_URL: has an empty entry in "n1:7000,,n2:7000"',
    ],
    [
      { REDIS_URL: 'redis://cache:6379', REDIS_TLS: 'true' },
      'REDIS_URL: is redis:// while REDIS_TLS is true: write rediss://, or host:port, got "redis://cache:6379"',
    ],
    [
      { REDIS_TYPE: 'cluster' },
      'REDIS_TYPE: is set but REDIS_URL is not; without REDIS_URL the limits are kept in memory',
    ],
    [
      { REDIS_AUTH: 'pw' },
      'REDIS_AUTH: is set but REDIS_URL is not; without REDIS_URL the limits are kept in memory',
    ],
  ])('%j', (env, message) => {
    const error = refusal(env);
    expect(error.message).toBe(message);
    expect(error.setting).toBe(message.slice(0, message.indexOf(':')));
  });

  it('masks the credentials of a REDIS_URL it refuses', () => {
    const { message } = refusal({
      REDIS_URL: 'redis://app:hunter2@cache:6379',
      REDIS_AUTH: 'other',
    });
    expect(message).toBe(
      'REDIS_AUTH: is set, and REDIS_URL carries credentials too: keep them in one place, got "redis://*****@cache:6379"',
    );
    expect(refusal({ REDIS_URL: 'redis://app:hunter2@cache:6379,n2:1' }).message).not.toContain(
      'hunter2',
    );
  });

  it.each([
    [['--config'], '--config: needs a file name after it'],
    [['--config', '--help'], '--config: needs a file name after it'],
    [['--config='], '--config: needs a file name after it'],
    [['--port', '80'], '--port: is not an argument of sentinel-rls; see --help'],
    [['config.yaml'], 'config.yaml: is not an argument of sentinel-rls; see --help'],
  ])('refuses the arguments %j', (argv, message) => {
    expect(refusal({}, argv).message).toBe(message);
  });
});

describe('readSettings: tracing', () => {
  it("reads upstream's TRACING_* variables", () => {
    expect(
      settings({
        TRACING_ENABLED: 'True',
        TRACING_EXPORTER_PROTOCOL: 'grpc',
        TRACING_SERVICE_NAME: 'edge-ratelimit',
        TRACING_SERVICE_NAMESPACE: 'mesh',
        TRACING_SERVICE_INSTANCE_ID: 'ratelimit-0',
        TRACING_SAMPLING_RATE: '0.25',
      }).tracing,
    ).toEqual({
      enabled: true,
      protocol: 'grpc',
      serviceName: 'edge-ratelimit',
      serviceNamespace: 'mesh',
      serviceInstanceId: 'ratelimit-0',
      samplingRate: 0.25,
    });
  });

  it.each([
    [
      { TRACING_ENABLED: 'yes' },
      'TRACING_ENABLED: must be true or false (or 1, 0, t, f), got "yes"',
    ],
    [
      { TRACING_EXPORTER_PROTOCOL: 'thrift' },
      'TRACING_EXPORTER_PROTOCOL: must be one of http, grpc, got "thrift"',
    ],
    [
      { TRACING_EXPORTER_PROTOCOL: 'http/protobuf' },
      'TRACING_EXPORTER_PROTOCOL: must be one of http, grpc, got "http/protobuf"',
    ],
    [
      { TRACING_SAMPLING_RATE: '1.5' },
      'TRACING_SAMPLING_RATE: must be a number from 0 to 1, got "1.5"',
    ],
    [
      { TRACING_SAMPLING_RATE: '-0.1' },
      'TRACING_SAMPLING_RATE: must be a number from 0 to 1, got "-0.1"',
    ],
    [
      { TRACING_SAMPLING_RATE: '10%' },
      'TRACING_SAMPLING_RATE: must be a number from 0 to 1, got "10%"',
    ],
    [
      { TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' },
      'OTEL_EXPORTER_OTLP_ENDPOINT: must be an http:// or https:// URL, got "collector:4318"',
    ],
    [
      { TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://collector:4317' },
      'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an http:// or https:// URL, got "grpc://collector:4317"',
    ],
    [
      { TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=a,api-key' },
      'OTEL_EXPORTER_OTLP_HEADERS: must be key=value pairs separated by commas; pair 2 is not',
    ],
    [
      { TRACING_ENABLED: 'true', OTEL_EXPORTER_OTLP_TRACES_HEADERS: '=token' },
      'OTEL_EXPORTER_OTLP_TRACES_HEADERS: must be key=value pairs separated by commas; pair 1 is not',
    ],
    [
      { OTEL_METRICS_EXPORTER: 'prometheus' },
      'OTEL_METRICS_EXPORTER: must be one of none, otlp, got "prometheus"',
    ],
    [
      { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      'OTEL_EXPORTER_OTLP_PROTOCOL: must be one of http/protobuf, grpc, got "http/json"',
    ],
    [
      {
        OTEL_METRICS_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http',
      },
      'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: must be one of http/protobuf, grpc, got "http"',
    ],
    [
      { OTEL_METRICS_EXPORTER: 'otlp', OTEL_METRIC_EXPORT_INTERVAL: '10s' },
      'OTEL_METRIC_EXPORT_INTERVAL: must be a whole number of milliseconds, 1 or more, got "10s"',
    ],
    [
      {
        OTEL_METRICS_EXPORTER: 'otlp',
        OTEL_METRIC_EXPORT_INTERVAL: '1000',
        OTEL_METRIC_EXPORT_TIMEOUT: '5000',
      },
      'OTEL_METRIC_EXPORT_TIMEOUT: must be at most OTEL_METRIC_EXPORT_INTERVAL (1000), got 5000',
    ],
    [
      { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'collector:4318' },
      'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: must be an http:// or https:// URL, got "collector:4318"',
    ],
    [
      { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'token' },
      'OTEL_EXPORTER_OTLP_METRICS_HEADERS: must be key=value pairs separated by commas; pair 1 is not',
    ],
  ])('refuses %j', (env, message) => {
    const error = refusal(env);
    expect(error.message).toBe(message);
    expect(error.setting).toBe(message.slice(0, message.indexOf(':')));
  });

  it('leaves the OTEL_ variables to others while tracing is off', () => {
    expect(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }).tracing.enabled).toBe(false);
  });

  it('exports metrics over OTLP only when OTEL_METRICS_EXPORTER says otlp', () => {
    const shared = { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_METRIC_EXPORT_INTERVAL: '10000' };
    expect(settings(shared).metricsExport.enabled).toBe(false);
    expect(settings({ ...shared, OTEL_METRICS_EXPORTER: 'none' }).metricsExport.enabled).toBe(
      false,
    );
    // A shorter interval brings the timeout down with it, as the SDK's default does.
    expect(settings({ ...shared, OTEL_METRICS_EXPORTER: 'OTLP' }).metricsExport).toEqual({
      enabled: true,
      protocol: 'grpc',
      intervalMs: 10_000,
      timeoutMs: 10_000,
    });
    expect(
      settings({
        ...shared,
        OTEL_METRICS_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/protobuf',
        OTEL_METRIC_EXPORT_TIMEOUT: '2500',
      }).metricsExport,
    ).toEqual({ enabled: true, protocol: 'http/protobuf', intervalMs: 10_000, timeoutMs: 2500 });
  });

  it('masks the credentials of an endpoint it refuses', () => {
    const { message } = refusal({
      TRACING_ENABLED: '1',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://user:hunter2@collector',
    });
    expect(message).not.toContain('hunter2');
  });
});

describe("envoyproxy/ratelimit's variables sentinel-rls does not read", () => {
  it('refuses GRPC_SERVER_USE_TLS rather than serve in plain text where TLS was asked for', () => {
    expect(() => readSettings({ GRPC_SERVER_USE_TLS: 'true' }, [])).toThrow(
      /^GRPC_SERVER_USE_TLS: is not supported/,
    );
    expect(() => readSettings({ GRPC_SERVER_USE_TLS: 'false' }, [])).not.toThrow();
  });

  it('names the others that are set, so that the service can warn of them', () => {
    const env = {
      USE_STATSD: 'true',
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: ':9090',
      LOCAL_CACHE_SIZE_IN_BYTES: '',
      REDIS_URL: 'redis://127.0.0.1:6379',
      // Read since REDIS_TYPE=sentinel is supported.
      REDIS_SENTINEL_AUTH: 'pw',
      GRPC_PORT: '8081',
    };
    expect(ignoredVariables(env)).toEqual(['PROMETHEUS_ADDR', 'USE_PROMETHEUS', 'USE_STATSD']);
  });

  it('reads TRACING_* always, and the OTEL_ ones only with tracing on', () => {
    const env = { TRACING_SAMPLING_RATE: '0.1', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' };
    expect(ignoredVariables(env)).toEqual(['OTEL_EXPORTER_OTLP_ENDPOINT']);
    expect(ignoredVariables({ ...env, TRACING_ENABLED: 'true' })).toEqual([]);
  });

  it('reads the OTEL_ ones with metric export on, and OTEL_METRICS_EXPORTER always', () => {
    const env = { OTEL_METRICS_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel:4318' };
    expect(ignoredVariables(env)).toEqual(['OTEL_EXPORTER_OTLP_ENDPOINT']);
    expect(ignoredVariables({ ...env, OTEL_METRICS_EXPORTER: 'otlp' })).toEqual([]);
  });
});
