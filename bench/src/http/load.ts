// Load from autocannon: 32 keep-alive connections, each sending its own API key.
import autocannon from 'autocannon';
import { API_KEY_HEADER } from './variants.ts';

export const CONNECTIONS = 32;

export interface Load {
  /** Responses per second over the measured run. */
  readonly rps: number;
  /** 99th percentile latency, ms. */
  readonly p99: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
}

async function hit(port: number, seconds: number): Promise<autocannon.Result> {
  let connection = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections: CONNECTIONS,
    duration: seconds,
    // autocannon ends a run at its first sample after the duration: sampling every 100 ms keeps
    // a run of a fraction of a second from lasting a whole second.
    sampleInt: 100,
    setupClient(client) {
      client.setHeaders({ [API_KEY_HEADER]: `bench-${connection++}` });
    },
  });
}

/** A warm-up, then the measured run. A refused request means a misconfigured limit: it throws. */
export async function load(port: number, warmUp: number, seconds: number): Promise<Load> {
  await hit(port, warmUp);
  const result = await hit(port, seconds);
  if (result.non2xx > 0) {
    throw new Error(`${result.non2xx} responses were not 2xx on port ${port}`);
  }
  return {
    rps: result.requests.total / result.duration,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
  };
}
