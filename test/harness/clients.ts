// Redis clients for tests: ioredis 6 (RESP3 by default) and ioredis 5 (RESP2), closed after each file.

import { setTimeout as sleep } from 'node:timers/promises';
import { Redis as Redis6, type RedisOptions } from 'ioredis';
import { Redis as Redis5 } from 'ioredis5';
import { afterAll, inject } from 'vitest';

export const CLIENTS = ['ioredis 6', 'ioredis 5'] as const;
export type ClientName = (typeof CLIENTS)[number];

const opened: Array<{ quit(): Promise<unknown>; disconnect(): void }> = [];
// quit() lets replies drain, but never settles for a client stuck reconnecting: cap it.
afterAll(async () => {
  await Promise.all(
    opened.splice(0).map(async (client) => {
      await Promise.race([client.quit().catch(() => {}), sleep(1_000)]);
      client.disconnect();
    }),
  );
});

/** A new client of the named library, connected to the run's Redis unless told otherwise. */
export function connect(
  name: ClientName = 'ioredis 6',
  url = inject('redisUrl'),
  options: RedisOptions = {},
): Redis6 {
  const client =
    name === 'ioredis 6'
      ? new Redis6(url, options)
      : (new Redis5(url, options as never) as unknown as Redis6);
  client.on('error', () => {});
  opened.push(client);
  return client;
}

/** A key prefix no other test uses, so suites can share one Redis. */
export function uniquePrefix(label = 'test'): string {
  return `${label}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}
