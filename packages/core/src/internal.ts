// What the adapters and the bench build on besides the public API: not for applications, and free
// to change.

export {
  adapterOptions,
  connectOnce,
  handlerAnswers,
  type RouteLayering,
  routeLayering,
  type SharedConnection,
} from './adapter-options.ts';
export { mergeHttpLimiterOptions } from './http/http-limiter.ts';
// The Lua scripts and the function library, for the bench's measure of what each costs Redis.
export { type LuaScript, library, type ScriptName, scripts } from './scripts.generated.ts';
export { checkFunction, checkObject, checkOneOf, describe, fail } from './validation.ts';
