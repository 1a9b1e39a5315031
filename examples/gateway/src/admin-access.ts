// Who may use the admin routes and a remote status page: the holder of the admin token.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Where the gateway's own routes live; everything else is the upstream's. */
export const ADMIN_PREFIX = '/_sentinel';

/** Routes that answer the operator, not clients: never limited, never proxied. */
export const UNLIMITED = { config: { rateLimit: false as const } };

const digest = (value: string) => createHash('sha256').update(value).digest();

/** The credential a request offers: `Bearer <token>`, or Basic's password, which a browser sends. */
function offeredToken(authorization: string | undefined): string | undefined {
  const [scheme, value] = authorization?.trim().split(/\s+/, 2) ?? [];
  if (value === undefined) return undefined;
  if (/^bearer$/i.test(scheme ?? '')) return value;
  if (!/^basic$/i.test(scheme ?? '')) return undefined;
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? undefined : decoded.slice(colon + 1);
}

/**
 * An onRequest hook that answers 401 unless the request carries the token. Both sides are hashed
 * first, so the comparison takes the same time whatever the length or the first wrong byte.
 * `basic` asks a browser for it with its own login prompt (any user name, the token as password).
 */
export function requireToken(token: string, { basic = false } = {}) {
  const expected = digest(token);
  return async function adminTokenCheck(request: FastifyRequest, reply: FastifyReply) {
    const offered = offeredToken(request.headers.authorization);
    if (offered !== undefined && timingSafeEqual(digest(offered), expected)) return undefined;
    reply
      .code(401)
      .header(
        'www-authenticate',
        basic ? 'Basic realm="Sentinel", charset="UTF-8"' : 'Bearer realm="Sentinel"',
      )
      .type('application/problem+json')
      .send({
        type: 'about:blank',
        title: 'Unauthorized',
        status: 401,
        detail: 'This route needs the admin token: Authorization: Bearer <token>.',
      });
    return reply;
  };
}

/**
 * The request line as logs show it. An admin route's path carries an API key: logs get
 * `/_sentinel/identities/[key]` instead.
 */
export function loggedUrl(url: string | undefined): string | undefined {
  const identities = `${ADMIN_PREFIX}/identities/`;
  return url?.startsWith(identities) ? `${identities}[key]` : url;
}
