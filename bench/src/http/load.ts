// Load from autocannon: 32 keep-alive connections, their requests keyed by `x-api-key` one of
// three ways. Every request is built before the run, so no way costs the client more per request.
import autocannon from 'autocannon';
import { API_KEY_HEADER } from './variants.ts';

export const CONNECTIONS = 32;

/** How many API keys the requests spread over: one, one per connection, or 10,000. */
export const KEY_COUNTS = { one: 1, connection: CONNECTIONS, spread: 10_000 } as const;
export type Keys = keyof typeof KEY_COUNTS;

export interface Load {
  /** Responses per second over the measured run. */
  readonly rps: number;
  /** 99th percentile latency, ms. */
  readonly p99: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
}

/**
 * The requests connection `c` cycles through when keys spread: every key `i` with
 * `i % CONNECTIONS === c`, so the connections share the 10,000 keys out and each key comes
 * back every ~313 requests of its connection. autocannon builds each request's bytes once.
 */
function spread(c: number): { headers: Record<string, string> }[] {
  const requests = [];
  for (let i = c; i < KEY_COUNTS.spread; i += CONNECTIONS) {
    requests.push({ headers: { [API_KEY_HEADER]: `bench-${i}` } });
  }
  return requests;
}

async function hit(port: number, seconds: number, keys: Keys): Promise<autocannon.Result> {
  let connection = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections: CONNECTIONS,
    duration: seconds,
    // autocannon ends a run at its first sample after the duration: sampling every 100 ms keeps
    // a run of a fraction of a second from lasting a whole second.
    sampleInt: 100,
    setupClient(client) {
      const c = connection++;
      if (keys === 'spread') client.setRequests(spread(c));
      else client.setHeaders({ [API_KEY_HEADER]: keys === 'one' ? 'bench-hot' : `bench-${c}` });
    },
  });
}

/**
 * A warm-up, unless `warmUp` is 0, then the measured run. A refused request means a
 * misconfigured limit: it throws.
 */
export async function load(
  port: number,
  warmUp: number,
  seconds: number,
  keys: Keys,
): Promise<Load> {
  if (warmUp > 0) await hit(port, warmUp, keys);
  const result = await hit(port, seconds, keys);
  if (result.non2xx > 0) {
    throw new Error(`${result.non2xx} responses were not 2xx on port ${port}`);
  }
  return {
    rps: result.requests.total / result.duration,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
  };
}
