// The plugin's logger: the app's own by default, so operators find Sentinel's lines beside Fastify's.
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { afterEach, expect, it } from 'vitest';
import { uniquePrefix } from '../../../test/harness/clients.ts';
import { sentinel } from '../src/index.ts';

const apps: { close(): Promise<unknown> }[] = [];
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

it('logs through the app logger by default, once per error code, instead of a process warning', async () => {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      lines.push(JSON.parse(String(chunk)));
      done();
    },
  });
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.message);
  process.on('warning', onWarning);
  try {
    const app = Fastify({ logger: { level: 'warn', stream } });
    apps.push(app);
    await app.register(sentinel, {
      prefix: uniquePrefix('fastify-logger'),
      tiers: { FREE: { limit: 10, window: '1m' } },
      // A tier from data the limiter was not given: reported, and the failure mode decides.
      identify: () => ({ key: 'user', tier: 'GOLD' }),
    });
    app.get('/', async () => ({ ok: true }));
    for (let i = 0; i < 3; i++) expect((await app.inject('/')).statusCode).toBe(200);
    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [
        40,
        "@sentinel/core: No tier named 'GOLD' (further UNKNOWN_TIER errors are not logged without onError)",
      ],
    ]);
    expect(warnings).toEqual([]);
  } finally {
    process.off('warning', onWarning);
  }
});
