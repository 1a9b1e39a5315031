// sentinel-rls's settings: envoyproxy/ratelimit's environment variables, Sentinel's own, and argv.

import { parseGoBool } from './go-bool.ts';
import {
  HEADER_STYLES,
  type HeaderStyle,
  LEGACY_HEADER_NAMES,
  type LegacyHeaderNames,
} from './headers.ts';

/** What a decision answers when Redis fails: OK, OVER_LIMIT, or a gRPC UNAVAILABLE. */
export const FAILURE_MODES = ['open', 'closed', 'error'] as const;
export type FailureMode = (typeof FAILURE_MODES)[number];

/** logrus's level names, which upstream's `LOG_LEVEL` takes (`warning` is read as `warn`). */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'panic'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Where the buckets live when `REDIS_URL` is set. */
export type RedisSettings = RedisServerSettings | RedisSentinelSettings;

/** `REDIS_TYPE` single or cluster: the servers, by URL. */
export interface RedisServerSettings {
  /** `REDIS_TYPE`: one server (or a proxy), or a Redis Cluster seeded with every URL. */
  readonly type: 'single' | 'cluster';
  /** `REDIS_URL` as redis:// or rediss:// URLs, `REDIS_AUTH` folded in: one for `single`. */
  readonly urls: readonly string[];
}

/** A user name (optional) and password, split from `user:password` at the first colon. */
export interface RedisCredentials {
  readonly username?: string;
  readonly password: string;
}

/** `REDIS_TYPE` sentinel: the master Redis Sentinel names, and how to reach both. */
export interface RedisSentinelSettings {
  readonly type: 'sentinel';
  /** `REDIS_URL`'s first entry: the name the sentinels monitor the master under. */
  readonly masterName: string;
  /** `REDIS_URL`'s other entries, each a sentinel's `host:port`. */
  readonly sentinels: readonly { readonly host: string; readonly port: number }[];
  /** `REDIS_SENTINEL_AUTH`: the sentinels' own credentials. */
  readonly sentinelAuth: RedisCredentials | undefined;
  /** `REDIS_AUTH`: the master's and its replicas'. */
  readonly auth: RedisCredentials | undefined;
  /** `REDIS_TLS`: to the sentinels and to the master alike, as upstream dials both. */
  readonly tls: boolean;
}

export interface Settings {
  /** `GRPC_HOST`. @default '0.0.0.0' */
  readonly grpcHost: string;
  /** `GRPC_PORT`; 0 picks a free port. @default 8081 */
  readonly grpcPort: number;
  /** `HOST`: the HTTP listener of /healthcheck, /json and /metrics. @default '0.0.0.0' */
  readonly host: string;
  /** `PORT`. @default 8080 */
  readonly port: number;
  /** `REDIS_URL` and `REDIS_TYPE`; undefined when `REDIS_URL` is unset: the memory store. */
  readonly redis: RedisSettings | undefined;
  /** `REDIS_TIMEOUT_MS`: the deadline of one Redis call. @default 50 */
  readonly redisTimeoutMs: number;
  /** `PREFIX`: the Redis key prefix. @default 'sentinel' */
  readonly prefix: string;
  /** `FAILURE_MODE`. @default 'open' */
  readonly failureMode: FailureMode;
  /** `SHADOW_MODE`: every limit answers OK, and counts what it would have refused. @default false */
  readonly shadowMode: boolean;
  /** `NEAR_LIMIT_RATIO`: the share of a limit past which hits count as near_limit. @default 0.8 */
  readonly nearLimitRatio: number;
  /** `MERGE_DOMAIN_CONFIG`: files may share a domain, and their descriptors merge. @default false */
  readonly mergeDomainConfig: boolean;
  /** `LIMIT_RESPONSE_HEADERS_ENABLED`: add RateLimit headers to responses. @default false */
  readonly limitResponseHeadersEnabled: boolean;
  /** `RESPONSE_HEADERS`: which fields those headers are. @default 'draft' */
  readonly responseHeaders: HeaderStyle;
  /** `LIMIT_LIMIT_HEADER`, `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`, for 'legacy'. */
  readonly legacyHeaderNames: LegacyHeaderNames;
  /** `LOG_LEVEL`, lower-cased. @default 'warn' */
  readonly logLevel: LogLevel;
  /** `TRACING_*`: spans over OTLP, as envoyproxy/ratelimit exports them. */
  readonly tracing: TracingSettings;
  /** `OTEL_METRICS_EXPORTER` and its kin: the statistics over OTLP as well as at /metrics. */
  readonly metricsExport: MetricsExportSettings;
  /** Every `--config FILE`, in order. */
  readonly configFiles: readonly string[];
  /** `--help` or `-h`: print {@link HELP} and exit. */
  readonly help: boolean;
  /** The environment as given, for the variables other parts read (RUNTIME_ROOT and its kin). */
  readonly env: NodeJS.ProcessEnv;
}

/** A setting that cannot be used, named as the user wrote it. */
export class SettingsError extends Error {
  override name = 'SettingsError';
  constructor(
    /** The variable or argument at fault, such as `GRPC_PORT` or `--config`. */
    readonly setting: string,
    problem: string,
  ) {
    super(`${setting}: ${problem}`);
  }
}

/** `host:port`, the form upstream's REDIS_URL takes; an IPv6 host in brackets. */
const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[^\s/:@[\]]+):(\d{1,5})$/;
/** An HTTP field name (RFC 9110 token). */
const FIELD_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** A variable's value; an empty one counts as unset, as a manifest's `FOO=` usually means. */
function read(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function quoted(value: string): string {
  return JSON.stringify(value);
}

function bool(env: NodeJS.ProcessEnv, name: string): boolean {
  const value = read(env, name);
  if (value === undefined) return false;
  const parsed = parseGoBool(value);
  if (parsed === undefined) {
    throw new SettingsError(name, `must be true or false (or 1, 0, t, f), got ${quoted(value)}`);
  }
  return parsed;
}

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = read(env, name);
  if (value === undefined) return fallback;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65_535) {
    throw new SettingsError(name, `must be a port number, got ${quoted(value)}`);
  }
  return Number(value);
}

/** One of `allowed`, in any case, as upstream compares REDIS_TYPE and LOG_LEVEL. */
function oneOf<T extends string>(
  env: NodeJS.ProcessEnv,
  name: string,
  allowed: readonly T[],
  fallback: T,
): T {
  const value = read(env, name);
  if (value === undefined) return fallback;
  const lower = value.toLowerCase() as T;
  if (!allowed.includes(lower)) {
    throw new SettingsError(name, `must be one of ${allowed.join(', ')}, got ${quoted(value)}`);
  }
  return lower;
}

function milliseconds(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = read(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value)) || Number(value) < 1) {
    throw new SettingsError(
      name,
      `must be a whole number of milliseconds, 1 or more, got ${quoted(value)}`,
    );
  }
  return Number(value);
}

function ratio(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const value = read(env, name);
  if (value === undefined) return fallback;
  if (!/^(?:\d+(?:\.\d*)?|\.\d+)$/.test(value) || Number(value) > 1) {
    throw new SettingsError(name, `must be a number from 0 to 1, got ${quoted(value)}`);
  }
  return Number(value);
}

function fieldName(env: NodeJS.ProcessEnv, name: string, fallback: string): string {
  const value = read(env, name);
  if (value === undefined) return fallback;
  if (!FIELD_NAME.test(value)) {
    throw new SettingsError(name, `must be an HTTP header name, got ${quoted(value)}`);
  }
  return value;
}

function prefix(env: NodeJS.ProcessEnv): string {
  const value = read(env, 'PREFIX') ?? 'sentinel';
  if (/[{}]/.test(value)) {
    throw new SettingsError(
      'PREFIX',
      `must not hold { or }, which would break the keys' hash tag, got ${quoted(value)}`,
    );
  }
  return value;
}

/** A Redis address for an error message: its credentials masked, as upstream logs it. */
function masked(address: string): string {
  return quoted(address.replace(/\/\/[^/@]*@/, '//*****@'));
}

/** One REDIS_URL entry as a URL: `host:port` gains a scheme, a URL is checked. */
function redisUrl(entry: string, tls: boolean): URL {
  const bare = HOST_PORT.exec(entry);
  if (bare !== null) {
    if (Number(bare[1]) < 1 || Number(bare[1]) > 65_535) {
      throw new SettingsError('REDIS_URL', `has no valid port in ${masked(entry)}`);
    }
    return new URL(`${tls ? 'rediss' : 'redis'}://${entry}`);
  }
  if (entry.startsWith('/')) {
    throw new SettingsError(
      'REDIS_URL',
      `names a unix socket, which sentinel-rls does not support: give host:port or a redis:// URL, got ${masked(entry)}`,
    );
  }
  let url: URL | undefined;
  try {
    url = new URL(entry);
  } catch {}
  if (url === undefined || !/^rediss?:$/.test(url.protocol) || url.hostname === '') {
    throw new SettingsError(
      'REDIS_URL',
      `must be host:port or a redis:// or rediss:// URL, got ${masked(entry)}`,
    );
  }
  if (tls && url.protocol === 'redis:') {
    throw new SettingsError(
      'REDIS_URL',
      `is redis:// while REDIS_TLS is true: write rediss://, or host:port, got ${masked(entry)}`,
    );
  }
  return url;
}

/** `password` or `user:password`, split at the first colon as upstream splits it. */
function credentials(auth: string): RedisCredentials {
  const colon = auth.indexOf(':');
  return colon === -1
    ? { password: auth }
    : { username: auth.slice(0, colon), password: auth.slice(colon + 1) };
}

/** REDIS_AUTH written into the URL. */
function withAuth(url: URL, auth: string): URL {
  if (url.username !== '' || url.password !== '') {
    throw new SettingsError(
      'REDIS_AUTH',
      `is set, and REDIS_URL carries credentials too: keep them in one place, got ${masked(url.href)}`,
    );
  }
  const { username, password } = credentials(auth);
  // The setters leave `%` as it is, so each part is encoded first: a URL reader decodes it back.
  if (username !== undefined) url.username = encodeURIComponent(username);
  url.password = encodeURIComponent(password);
  return url;
}

function redisSettings(env: NodeJS.ProcessEnv): RedisSettings | undefined {
  const type = oneOf(env, 'REDIS_TYPE', ['single', 'cluster', 'sentinel'], 'single');
  const tls = bool(env, 'REDIS_TLS');
  const auth = read(env, 'REDIS_AUTH');
  const sentinelAuth = read(env, 'REDIS_SENTINEL_AUTH');
  const value = read(env, 'REDIS_URL');
  if (value === undefined) {
    // Without REDIS_URL the buckets are in memory; these would be silently ignored.
    const orphan = [
      type !== 'single' && 'REDIS_TYPE',
      auth !== undefined && 'REDIS_AUTH',
      sentinelAuth !== undefined && 'REDIS_SENTINEL_AUTH',
      tls && 'REDIS_TLS',
    ].find(Boolean);
    if (orphan) {
      throw new SettingsError(
        orphan,
        'is set but REDIS_URL is not; without REDIS_URL the limits are kept in memory',
      );
    }
    return undefined;
  }
  if (sentinelAuth !== undefined && type !== 'sentinel') {
    throw new SettingsError(
      'REDIS_SENTINEL_AUTH',
      `is the sentinels' password, and REDIS_TYPE is ${type}, not sentinel; REDIS_AUTH is the servers'`,
    );
  }
  const entries = value.split(',').map((entry) => entry.trim());
  if (entries.some((entry) => entry === '')) {
    throw new SettingsError('REDIS_URL', `has an empty entry in ${masked(value)}`);
  }
  if (type === 'sentinel') return sentinelSettings(entries, value, { tls, auth, sentinelAuth });
  if (type === 'single' && entries.length > 1) {
    throw new SettingsError(
      'REDIS_URL',
      `is a list, which needs REDIS_TYPE=cluster, got ${masked(value)}`,
    );
  }
  const urls = entries.map((entry) => {
    const url = redisUrl(entry, tls);
    return (auth === undefined ? url : withAuth(url, auth)).href;
  });
  return { type, urls };
}

const SENTINEL_FORM = 'the master name, then each sentinel as host:port (mymaster,10.0.0.1:26379)';

/**
 * Upstream's sentinel form of REDIS_URL: the master's name, then the sentinels. Credentials and
 * TLS are not written in it but come from REDIS_AUTH, REDIS_SENTINEL_AUTH and REDIS_TLS, as
 * upstream reads them, so each has one place.
 */
function sentinelSettings(
  entries: readonly string[],
  value: string,
  options: { tls: boolean; auth: string | undefined; sentinelAuth: string | undefined },
): RedisSentinelSettings {
  const [masterName, ...addresses] = entries as [string, ...string[]];
  if (addresses.length === 0) {
    throw new SettingsError(
      'REDIS_URL',
      `under REDIS_TYPE=sentinel must list ${SENTINEL_FORM}, got ${masked(value)}`,
    );
  }
  // A list of sentinels alone would take the first sentinel for the master's name.
  if (HOST_PORT.test(masterName) || masterName.includes('://')) {
    throw new SettingsError(
      'REDIS_URL',
      `under REDIS_TYPE=sentinel starts with the master name, not an address: list ${SENTINEL_FORM}, got ${masked(value)}`,
    );
  }
  const sentinels = addresses.map((entry) => {
    const bare = HOST_PORT.exec(entry);
    if (bare === null) {
      throw new SettingsError(
        'REDIS_URL',
        `names each sentinel as host:port (its password goes in REDIS_SENTINEL_AUTH, TLS in REDIS_TLS), got ${masked(entry)}`,
      );
    }
    const port = Number(bare[1]);
    if (port < 1 || port > 65_535) {
      throw new SettingsError('REDIS_URL', `has no valid port in ${masked(entry)}`);
    }
    // ioredis takes an IPv6 host without its brackets.
    const host = entry.slice(0, entry.lastIndexOf(':')).replace(/^\[(.*)\]$/, '$1');
    return { host, port };
  });
  return {
    type: 'sentinel',
    masterName,
    sentinels,
    sentinelAuth:
      options.sentinelAuth === undefined ? undefined : credentials(options.sentinelAuth),
    auth: options.auth === undefined ? undefined : credentials(options.auth),
    tls: options.tls,
  };
}

interface Arguments {
  readonly configFiles: string[];
  readonly help: boolean;
}

/** `--config FILE` (or `--config=FILE`), repeatable, and `--help`; nothing else. */
function readArguments(argv: readonly string[]): Arguments {
  const configFiles: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--help' || arg === '-h') {
      help = true;
    } else if (arg === '--config' || arg.startsWith('--config=')) {
      const file = arg === '--config' ? argv[++i] : arg.slice('--config='.length);
      if (file === undefined || file === '' || file.startsWith('-')) {
        throw new SettingsError('--config', 'needs a file name after it');
      }
      configFiles.push(file);
    } else {
      throw new SettingsError(arg, 'is not an argument of sentinel-rls; see --help');
    }
  }
  return { configFiles, help };
}

/**
 * The settings of one sentinel-rls process, each checked here: a bad value throws a
 * {@link SettingsError} naming the variable and the value. `argv` is what follows the program
 * name (`process.argv.slice(2)`). With `--help` the environment is not read: its settings are
 * the defaults, so that help prints even where a variable is wrong.
 * @example readSettings(process.env, process.argv.slice(2))
 */
export function readSettings(env: NodeJS.ProcessEnv, argv: readonly string[]): Settings {
  const { configFiles, help } = readArguments(argv);
  const vars = help ? {} : env;
  // Serving in plain text where TLS was asked for would expose what the mesh sends.
  if (bool(vars, 'GRPC_SERVER_USE_TLS')) {
    throw new SettingsError(
      'GRPC_SERVER_USE_TLS',
      'is not supported: sentinel-rls serves gRPC in plain text; terminate TLS in the mesh or a sidecar',
    );
  }
  return {
    grpcHost: read(vars, 'GRPC_HOST') ?? '0.0.0.0',
    grpcPort: port(vars, 'GRPC_PORT', 8081),
    host: read(vars, 'HOST') ?? '0.0.0.0',
    port: port(vars, 'PORT', 8080),
    redis: redisSettings(vars),
    redisTimeoutMs: milliseconds(vars, 'REDIS_TIMEOUT_MS', 50),
    prefix: prefix(vars),
    failureMode: oneOf(vars, 'FAILURE_MODE', FAILURE_MODES, 'open'),
    shadowMode: bool(vars, 'SHADOW_MODE'),
    nearLimitRatio: ratio(vars, 'NEAR_LIMIT_RATIO', 0.8),
    mergeDomainConfig: bool(vars, 'MERGE_DOMAIN_CONFIG'),
    limitResponseHeadersEnabled: bool(vars, 'LIMIT_RESPONSE_HEADERS_ENABLED'),
    responseHeaders: oneOf(vars, 'RESPONSE_HEADERS', HEADER_STYLES, 'draft'),
    legacyHeaderNames: {
      limit: fieldName(vars, 'LIMIT_LIMIT_HEADER', LEGACY_HEADER_NAMES.limit),
      remaining: fieldName(vars, 'LIMIT_REMAINING_HEADER', LEGACY_HEADER_NAMES.remaining),
      reset: fieldName(vars, 'LIMIT_RESET_HEADER', LEGACY_HEADER_NAMES.reset),
    },
    logLevel: logLevel(vars),
    tracing: tracingSettings(vars),
    metricsExport: metricsExportSettings(vars),
    configFiles,
    help,
    env,
  };
}

function logLevel(env: NodeJS.ProcessEnv): LogLevel {
  const value = read(env, 'LOG_LEVEL');
  if (value?.toLowerCase() === 'warning') return 'warn';
  return oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'warn');
}

/** `sentinel-rls --help`: every variable with its default. */
export const HELP = `Usage: sentinel-rls [--config FILE]... [--help]

Envoy's rate limit service, configured as envoyproxy/ratelimit is, on Sentinel's buckets.

Arguments:
  --config FILE                   A rate limit configuration file; repeat it for several.
                                  Without one, the files of RUNTIME_ROOT are read.
  --help, -h                      Print this help.

Environment, as envoyproxy/ratelimit reads it:
  GRPC_HOST                       gRPC listen address. Default 0.0.0.0
  GRPC_PORT                       gRPC port. Default 8081
  HOST                            HTTP listen address. Default 0.0.0.0
  PORT                            HTTP port: /healthcheck, /json, /metrics. Default 8080
  REDIS_URL                       host:port, or a redis:// or rediss:// URL; for cluster, a
                                  comma-separated list; for sentinel, the master name, then
                                  each sentinel's host:port (mymaster,10.0.0.1:26379,...).
                                  Default: unset, limits kept in memory
  REDIS_TYPE                      single, cluster or sentinel. Default single
  REDIS_AUTH                      The servers' password, or user:password. Default: unset
  REDIS_SENTINEL_AUTH             The sentinels' password, or user:password. Default: unset
  REDIS_TLS                       Connect to host:port entries, and to the sentinels and their
                                  master, with TLS. Default false
  SHADOW_MODE                     Answer OK always; count what would be refused. Default false
  NEAR_LIMIT_RATIO                Share of a limit past which hits are near_limit. Default 0.8
  MERGE_DOMAIN_CONFIG             Merge the files that share a domain. Default false
  LIMIT_RESPONSE_HEADERS_ENABLED  Add RateLimit headers to responses. Default false
  LIMIT_LIMIT_HEADER              Legacy limit header. Default RateLimit-Limit
  LIMIT_REMAINING_HEADER          Legacy remaining header. Default RateLimit-Remaining
  LIMIT_RESET_HEADER              Legacy reset header. Default RateLimit-Reset
  LOG_LEVEL                       trace, debug, info, warn, error, fatal, panic. Default warn
  RUNTIME_ROOT                    Configuration root. Default /srv/runtime_data/current
  RUNTIME_SUBDIRECTORY            Subdirectory of RUNTIME_ROOT. Default: unset
  RUNTIME_APPDIRECTORY            Directory of the files in it. Default config
  RUNTIME_IGNOREDOTFILES          Skip files whose name starts with a dot. Default false
  TRACING_ENABLED                 Export spans over OTLP. Default false
  TRACING_EXPORTER_PROTOCOL       http (OTLP/HTTP, protobuf) or grpc. Default http
  TRACING_SERVICE_NAME            The spans' service.name. Default RateLimit
  TRACING_SERVICE_NAMESPACE       Their service.namespace. Default: unset, left out
  TRACING_SERVICE_INSTANCE_ID     Their service.instance.id. Default: a random UUID
  TRACING_SAMPLING_RATE           Share of traces sampled, 0 to 1, where the caller has not
                                  decided. Default 1
  OTEL_EXPORTER_OTLP_ENDPOINT     Where spans and metrics go. Default
                                  http://localhost:4318 (HTTP) or http://localhost:4317 (gRPC)
  OTEL_METRICS_EXPORTER           otlp: export the statistics over OTLP too, as well as
                                  serving them at /metrics. Default none
  OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL
                                  http/protobuf or grpc, for metrics. Default http/protobuf
  OTEL_METRIC_EXPORT_INTERVAL     Milliseconds between metric exports. Default 60000
  OTEL_METRIC_EXPORT_TIMEOUT      Milliseconds one metric export may take. Default 30000
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, the
  OTEL_EXPORTER_OTLP_*_HEADERS, the other OTEL_EXPORTER_OTLP_* and OTEL_RESOURCE_ATTRIBUTES
  are read as the OpenTelemetry SDK reads them, with tracing or metric export on.

Sentinel's own:
  RESPONSE_HEADERS                draft (RateLimit-Policy and RateLimit, IETF draft 11) or
                                  legacy (RateLimit-Limit, -Remaining, -Reset). Default draft
  REDIS_TIMEOUT_MS                Deadline of one Redis call, in ms. Default 50
  FAILURE_MODE                    Answer while Redis fails: open (OK), closed (OVER_LIMIT)
                                  or error (gRPC UNAVAILABLE). Default open
  PREFIX                          Redis key prefix. Default sentinel

Booleans are read as Go reads them: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False.
`;

/**
 * envoyproxy/ratelimit's variables that sentinel-rls does not read (statsd, its own Prometheus
 * listener, local caches, pools and pipelines, xDS, memcache): those set in `env`, so
 * that a migrated deployment hears that they have no effect here.
 */
export function ignoredVariables(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env)
    .filter(
      (name) => IGNORED.test(name) && !readByTelemetry(env, name) && read(env, name) !== undefined,
    )
    .sort();
}

const IGNORED =
  /^(USE_STATSD|STATSD_.*|USE_DOG_STATSD|DOG_STATSD_.*|USE_PROMETHEUS|PROMETHEUS_.*|EXTRA_TAGS|LOCAL_CACHE_SIZE_IN_BYTES|EXPIRATION_JITTER_MAX_SECONDS|STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT|REDIS_POOL_.*|REDIS_PIPELINE_.*|REDIS_PERSECOND.*|REDIS_HEALTH_CHECK_ACTIVE_CONNECTION|REDIS_TLS_CLIENT_CERT|REDIS_TLS_CLIENT_KEY|REDIS_TLS_CACERT|REDIS_TLS_SKIP_HOSTNAME_VERIFICATION|REDIS_TIMEOUT|BACKEND_TYPE|MEMCACHE_.*|CONFIG_TYPE|CONFIG_GRPC_XDS_.*|QUOTA_MODE|RESPONSE_DYNAMIC_METADATA|TRACING_.*|OTEL_.*|GRPC_UDS|GRPC_SERVER_TLS_.*|GRPC_CLIENT_TLS_.*|GRPC_MAX_CONNECTION_AGE.*|DEBUG_HOST|DEBUG_PORT|LOG_FORMAT|RUNTIME_WATCH_ROOT|CACHE_KEY_PREFIX|HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)$/;

// Tracing: upstream's TRACING_* variables, and the standard OTEL_EXPORTER_OTLP_* ones its OTLP
// exporter reads for where to send and with which headers.

/** What `TRACING_EXPORTER_PROTOCOL` takes: OTLP over HTTP (protobuf bodies) or over gRPC. */
export const TRACING_PROTOCOLS = ['http', 'grpc'] as const;
export type TracingProtocol = (typeof TRACING_PROTOCOLS)[number];

export interface TracingSettings {
  /** `TRACING_ENABLED`. @default false */
  readonly enabled: boolean;
  /** `TRACING_EXPORTER_PROTOCOL`. @default 'http' */
  readonly protocol: TracingProtocol;
  /** `TRACING_SERVICE_NAME`: the resource's service.name. @default 'RateLimit' */
  readonly serviceName: string;
  /** `TRACING_SERVICE_NAMESPACE`: service.namespace, left out when unset. */
  readonly serviceNamespace: string | undefined;
  /** `TRACING_SERVICE_INSTANCE_ID`: service.instance.id; unset, a random UUID at start. */
  readonly serviceInstanceId: string | undefined;
  /** `TRACING_SAMPLING_RATE`: the share of the traces that start here that are kept. @default 1 */
  readonly samplingRate: number;
}

/** The OTLP exporter's endpoints: a bad one would only be heard of at the first export. */
const OTLP_ENDPOINTS = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];
const OTLP_METRICS_ENDPOINTS = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
];
/** Its headers, `key=value,key=value`: the exporter skips a malformed pair without a word. */
const OTLP_HEADERS = ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'];
const OTLP_METRICS_HEADERS = ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_METRICS_HEADERS'];

function tracingSettings(env: NodeJS.ProcessEnv): TracingSettings {
  const enabled = bool(env, 'TRACING_ENABLED');
  if (enabled) {
    for (const name of OTLP_ENDPOINTS) otlpEndpoint(env, name);
    for (const name of OTLP_HEADERS) otlpHeaders(env, name);
  }
  return {
    enabled,
    protocol: oneOf(env, 'TRACING_EXPORTER_PROTOCOL', TRACING_PROTOCOLS, 'http'),
    serviceName: read(env, 'TRACING_SERVICE_NAME') ?? 'RateLimit',
    serviceNamespace: read(env, 'TRACING_SERVICE_NAMESPACE'),
    serviceInstanceId: read(env, 'TRACING_SERVICE_INSTANCE_ID'),
    samplingRate: ratio(env, 'TRACING_SAMPLING_RATE', 1),
  };
}

function otlpEndpoint(env: NodeJS.ProcessEnv, name: string): void {
  const value = read(env, name);
  if (value === undefined) return;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {}
  if (url === undefined || !/^https?:$/.test(url.protocol) || url.hostname === '') {
    throw new SettingsError(name, `must be an http:// or https:// URL, got ${masked(value)}`);
  }
}

function otlpHeaders(env: NodeJS.ProcessEnv, name: string): void {
  const value = read(env, name);
  if (value === undefined) return;
  const bad = value.split(',').findIndex((pair) => !/^\s*[^\s=]+\s*=/.test(pair));
  if (bad !== -1) {
    // The value is not shown: these headers usually carry an API key.
    throw new SettingsError(
      name,
      `must be key=value pairs separated by commas; pair ${bad + 1} is not`,
    );
  }
}

/**
 * TRACING_* and OTEL_METRICS_EXPORTER are read always; the other OTEL_* are the exporters', and
 * read only when one of them is on.
 */
function readByTelemetry(env: NodeJS.ProcessEnv, name: string): boolean {
  if (name.startsWith('TRACING_') || name === 'OTEL_METRICS_EXPORTER') return true;
  if (!name.startsWith('OTEL_')) return false;
  const tracing = read(env, 'TRACING_ENABLED');
  return (
    (tracing !== undefined && parseGoBool(tracing) === true) ||
    read(env, 'OTEL_METRICS_EXPORTER')?.toLowerCase() === 'otlp'
  );
}

// Metrics over OTLP. Upstream exports its statistics to statsd or Prometheus only; here they go
// over OTLP as well when the standard OTEL_METRICS_EXPORTER asks, under upstream's names.

/** What `OTEL_METRICS_EXPORTER` takes. Unset means none: /metrics serves them already. */
export const METRICS_EXPORTERS = ['none', 'otlp'] as const;
/** The OTLP protocols metrics are sent over: protobuf over HTTP, or gRPC. */
export const METRICS_PROTOCOLS = ['http/protobuf', 'grpc'] as const;
export type MetricsProtocol = (typeof METRICS_PROTOCOLS)[number];

export interface MetricsExportSettings {
  /** `OTEL_METRICS_EXPORTER` is `otlp`. @default false */
  readonly enabled: boolean;
  /** `OTEL_EXPORTER_OTLP_METRICS_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`. @default 'http/protobuf' */
  readonly protocol: MetricsProtocol;
  /** `OTEL_METRIC_EXPORT_INTERVAL`. @default 60000 */
  readonly intervalMs: number;
  /** `OTEL_METRIC_EXPORT_TIMEOUT`: at most the interval, as the SDK requires. @default 30000 */
  readonly timeoutMs: number;
}

function metricsExportSettings(env: NodeJS.ProcessEnv): MetricsExportSettings {
  if (oneOf(env, 'OTEL_METRICS_EXPORTER', METRICS_EXPORTERS, 'none') === 'none') {
    // The rest is not read: a trace-only setup may set the shared variables to anything.
    return { enabled: false, protocol: 'http/protobuf', intervalMs: 60_000, timeoutMs: 30_000 };
  }
  for (const name of OTLP_METRICS_ENDPOINTS) otlpEndpoint(env, name);
  for (const name of OTLP_METRICS_HEADERS) otlpHeaders(env, name);
  const protocolVariable =
    read(env, 'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL') === undefined
      ? 'OTEL_EXPORTER_OTLP_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_METRICS_PROTOCOL';
  const intervalMs = milliseconds(env, 'OTEL_METRIC_EXPORT_INTERVAL', 60_000);
  const timeoutMs = milliseconds(env, 'OTEL_METRIC_EXPORT_TIMEOUT', Math.min(30_000, intervalMs));
  if (timeoutMs > intervalMs) {
    throw new SettingsError(
      'OTEL_METRIC_EXPORT_TIMEOUT',
      `must be at most OTEL_METRIC_EXPORT_INTERVAL (${intervalMs}), got ${timeoutMs}`,
    );
  }
  return {
    enabled: true,
    protocol: oneOf(env, protocolVariable, METRICS_PROTOCOLS, 'http/protobuf'),
    intervalMs,
    timeoutMs,
  };
}
