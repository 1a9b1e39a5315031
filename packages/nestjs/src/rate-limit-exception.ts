// The refusal as Nest sees it: an HttpException whose response is the problem+json body.

import { HttpException } from '@nestjs/common';
import type { Decision, ProblemDetails, RefusalReason } from '@sentinel/core';

/**
 * Thrown by `SentinelGuard` for a request it refuses: 429 over the limit, 403 past the `ban`
 * count or for a cost larger than a limit, 401 for a rejected API key, 503 when shed or failing
 * closed. Its response is the problem+json body, which Nest's default filter sends as it is. An
 * exception filter of the app's may reshape it from `problem`, `decision` and `headers`; the
 * headers are on the response already.
 * @example @Catch(RateLimitException) class Slow implements ExceptionFilter { ... }
 */
export class RateLimitException extends HttpException {
  constructor(
    /** The RFC 9457 body, also this exception's `getResponse()`. */
    readonly problem: ProblemDetails,
    status: number,
    readonly reason: RefusalReason,
    /** The decision refused, undefined for a rejected key or a failure before any decision. */
    readonly decision: Decision | undefined,
    /** The RateLimit headers and Retry-After the guard set on the response. */
    readonly headers: Readonly<Record<string, string>>,
  ) {
    super(problem, status, { description: problem.title });
    // HttpException names an object response after the class; GraphQL clients read `message`.
    this.message = problem.title;
  }
}
