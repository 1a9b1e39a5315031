// What the adapters build on besides the public API: not for applications, and free to change.

export {
  adapterOptions,
  handlerAnswers,
  type RouteLayering,
  routeLayering,
} from './adapter-options.ts';
export { mergeHttpLimiterOptions } from './http/http-limiter.ts';
export { checkFunction, checkObject, checkOneOf, describe, fail } from './validation.ts';
