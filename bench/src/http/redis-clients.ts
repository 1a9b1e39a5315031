// The servers' own Redis clients: the floor's and the peers'. Each gets the settings Sentinel
// gives the client it builds from `redisUrl`, so the clients differ only in who uses them.
import { once } from 'node:events';
import { LIMITER_CLIENT_OPTIONS } from '@sentinel/core';
import { Redis } from 'ioredis';
import { FLOOR_SCRIPT } from '../reference-script.ts';
import { API_KEY_HEADER } from './variants.ts';

/** A connected client: without an offline queue, a command sent before `ready` would fail. */
export async function connect(url: string): Promise<Redis> {
  const client = new Redis(url, { ...LIMITER_CLIENT_OPTIONS });
  client.on('error', () => {});
  await once(client, 'ready');
  return client;
}

interface RequestLike {
  headers: Record<string, string | string[] | undefined>;
}

export interface Floor {
  /** One EVALSHA of the floor script, on the key of the API key the request carries. */
  call(req: RequestLike): Promise<unknown>;
  close(): Promise<void>;
}

/** The one-call floor: what any limiter on Redis's clock pays per request, and nothing else. */
export async function createFloor(url: string): Promise<Floor> {
  const client = await connect(url);
  const sha = (await client.script('LOAD', FLOOR_SCRIPT)) as string;
  return {
    call(req) {
      const apiKey = req.headers[API_KEY_HEADER];
      return client.evalsha(sha, 1, `floor:${Array.isArray(apiKey) ? apiKey[0] : apiKey}`);
    },
    close: async () => void (await client.quit()),
  };
}
