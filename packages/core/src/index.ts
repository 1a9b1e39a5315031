// @sentinel/core: atomic distributed rate limiting, against Redis or in memory.
export type { CircuitBreakerOptions } from './circuit-breaker.ts';
export { SentinelError, type SentinelErrorCode } from './errors.ts';
export { createLimiter, type Limiter, type LimiterOptions } from './limiter.ts';
export { MemoryStore, type MemoryStoreOptions } from './memory-store.ts';
export { type RedisClient, RedisStore, type RedisStoreOptions } from './redis-store.ts';
export { evaluateScript, isNoScriptError, type ScriptClient } from './script-evaluator.ts';
export { EPOCH_MS, type LuaScript, type ScriptName, scripts } from './scripts.generated.ts';
export * from './types.ts';
export { formatWindow, parseWindow } from './window.ts';
