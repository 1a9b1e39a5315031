// Type-level checks, run by `tsc --build`: each limiter's decision is typed at its contextKey through Hono's Env, and a key no limiter sets is an error.
import type { Decision } from '@sentinel/core';
import { Hono } from 'hono';
import { type RateLimitVariables, rateLimit } from '../src/index.ts';

/** True when A and B are the same type, not merely assignable one way. */
type Equals<A, B> =
  (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// The app declares what its limiters set, as Hono's Env declares any context variable.
const app = new Hono<{ Variables: RateLimitVariables<'searchLimit'> }>();
const search = rateLimit({ limit: 10, window: '1m', contextKey: 'searchLimit' });
app.use('/search/*', search);
app.get('/search/items', (c) => {
  const decision = c.get('searchLimit');
  const typed: Equals<typeof decision, Decision | undefined> = true;
  // @ts-expect-error: no limiter of this app sets 'rateLimit'
  c.get('rateLimit');
  // @ts-expect-error: a misspelt key is no key at all
  c.get('searchLimt');
  return c.json({ typed, remaining: decision?.remaining });
});

// A route's middleware carries its key into the handler after it, with no Env declared.
const plain = new Hono();
plain.get('/', rateLimit({ limit: 5, window: '1s' }), (c) => {
  const decision = c.get('rateLimit');
  const typed: Equals<typeof decision, Decision | undefined> = true;
  return c.json({ typed });
});
plain.get('/admin', search.route({ contextKey: 'adminLimit', limit: 1 }), (c) => {
  const decision = c.get('adminLimit');
  const typed: Equals<typeof decision, Decision | undefined> = true;
  // @ts-expect-error: the route's middleware sets its own key, not the one it was made from
  c.get('searchLimit');
  return c.json({ typed });
});

// The options' functions get Hono's context, typed by the app's Env.
type Env = { Variables: RateLimitVariables & { user: { id: string } | undefined } };
const byUser = rateLimit<'rateLimit', Env>({
  limit: 10,
  window: '1m',
  identify: (req) => {
    const user = req.c.get('user');
    return user === undefined ? null : { key: `user:${user.id}` };
  },
  handler: (c, decision) => c.json({ retryIn: decision.retryAfterMs }, 429),
});
new Hono<Env>().use(byUser);

// @ts-expect-error: the context key is a string
rateLimit({ limit: 1, window: '1m', contextKey: 7 });
// @ts-expect-error: getConnInfo is a function of the context
rateLimit({ limit: 1, window: '1m', getConnInfo: '127.0.0.1' });
