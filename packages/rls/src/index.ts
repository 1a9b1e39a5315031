// @sentinel/rls: Envoy's rate limit service on Sentinel's buckets.
export { ConfigError } from './config/config-error.ts';
export { type LoadOptions, loadConfig } from './config/load-config.ts';
export {
  type ConfigSource,
  type ConfigWatcher,
  configSource,
  readConfig,
  watchConfig,
} from './config/runtime-files.ts';
export {
  BadRequestError,
  type Code as DescriptorCode,
  Decider,
  type DeciderOptions,
  type DescriptorVerdict,
  descriptorPolicy,
  UNLIMITED_REMAINING,
  type Verdict,
} from './decide.ts';
export {
  type CallOutcome,
  type Decide,
  type DecideContext,
  type GrpcServer,
  type GrpcServerOptions,
  RATE_LIMIT_SERVICE,
  startGrpcServer,
  type TraceCall,
  type TracedCall,
} from './grpc/grpc-server.ts';
export type {
  Code,
  CurrentLimitMessage,
  DescriptorStatusMessage,
  HeaderValueMessage,
  JsonValue,
  LimitOverrideMessage,
  LimitUnit,
  QuotaMessage,
  RateLimitDescriptorMessage,
  RateLimitRequestMessage,
  RateLimitResponseMessage,
} from './grpc/messages.ts';
export {
  httpStatusOf,
  RequestJsonError,
  requestFromJson,
  responseToJson,
} from './grpc/proto-json.ts';
export {
  HEADER_STYLES,
  type HeaderStatus,
  type HeaderStyle,
  LEGACY_HEADER_NAMES,
  type LegacyHeaderNames,
  responseHeaders,
} from './headers.ts';
export {
  type HttpServer,
  type HttpServerOptions,
  MAX_JSON_BODY_BYTES,
  startHttpServer,
} from './http/http-server.ts';
export {
  type DescriptorOutcome,
  type RequestMethod,
  type RlsCounts,
  RlsMetrics,
  type RlsMetricsOptions,
  STATS,
  type Stat,
  type StatAttributes,
  TIME_BUCKETS,
} from './metrics.ts';
export {
  type RateLimitService,
  StoreUnavailableError,
  startRateLimitService,
} from './service.ts';
export {
  FAILURE_MODES,
  type FailureMode,
  HELP,
  ignoredVariables,
  LOG_LEVELS,
  type LogLevel,
  METRICS_EXPORTERS,
  METRICS_PROTOCOLS,
  type MetricsExportSettings,
  type MetricsProtocol,
  type RedisCredentials,
  type RedisSentinelSettings,
  type RedisServerSettings,
  type RedisSettings,
  readSettings,
  type Settings,
  SettingsError,
  TRACING_PROTOCOLS,
  type TracingProtocol,
  type TracingSettings,
} from './settings.ts';
export type {
  DescriptorEntry,
  MatchedLimit,
  RateLimitConfig,
  RateLimitRule,
  RequestDescriptor,
  Unit,
} from './types.ts';
export { UNIT_SECONDS } from './types.ts';
