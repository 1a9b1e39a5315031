// Which servers the HTTP suite starts: per framework, the bare app, the one-call floor, Sentinel
// and that framework's usual Redis-backed peers. Shared by the suite and the server entry point.
export const FRAMEWORKS = ['express', 'koa', 'fastify'] as const;
export type Framework = (typeof FRAMEWORKS)[number];

export const PEERS = {
  express: ['express-rate-limit', 'rate-limiter-flexible'],
  koa: ['koa-ratelimit'],
  fastify: ['@fastify/rate-limit'],
} as const satisfies Record<Framework, readonly string[]>;

export type Variant = 'bare' | 'floor' | 'sentinel' | (typeof PEERS)[Framework][number];

export function variantsOf(framework: Framework): readonly Variant[] {
  return ['bare', 'floor', 'sentinel', ...PEERS[framework]];
}

/** Every limiter runs at this many requests a minute, so nothing is refused and each does its full work. */
export const HUGE_LIMIT = 1e9;
export const WINDOW_MS = 60_000;

/** The header that tells connections apart: Sentinel's default identity reads it. */
export const API_KEY_HEADER = 'x-api-key';

/** A running server, as each framework's app module hands it back. */
export interface Running {
  readonly port: number;
  close(): Promise<void>;
}
