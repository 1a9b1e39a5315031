// Test apps for the plugin's suites, closed after each test.
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { afterEach } from 'vitest';

const open: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((app) => app.close()));
});

/** A Fastify app closed after the test; trusts X-Forwarded-For so tests can pick the client IP. */
export function app(): FastifyInstance {
  const created = Fastify({ trustProxy: true });
  open.push(created);
  return created;
}

/** A route handler answering with the decision the plugin exposed. */
export async function answer(request: FastifyRequest) {
  // ?? null: outside the plugin's context the decorator is absent.
  return { ok: true, rateLimit: request.rateLimit ?? null };
}

/** Status codes of `times` GET requests to `url`, one after another, from one client. */
export async function statuses(
  server: FastifyInstance,
  url: string,
  times: number,
  headers: Record<string, string> = {},
): Promise<number[]> {
  const codes: number[] = [];
  for (let i = 0; i < times; i++) {
    codes.push((await server.inject({ url, headers })).statusCode);
  }
  return codes;
}
