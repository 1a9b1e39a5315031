// The published packages: packed as npm would, checked for what a tarball holds, installed into a
// fresh project with npm, then imported from CommonJS, ESM and TypeScript.
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpReceiver } from './rls/otlp-receiver.ts';

const run = promisify(execFile);
const root = new URL('..', import.meta.url).pathname;
const PACKAGES = {
  core: 'createLimiter',
  express: 'rateLimit',
  koa: 'rateLimit',
  fastify: 'sentinel',
  hono: 'rateLimit',
  fetch: 'withRateLimit',
  nestjs: 'SentinelModule',
  rls: 'startRateLimitService',
} as const;
const RLS_VERSION = (
  JSON.parse(readFileSync(join(root, 'packages/rls/package.json'), 'utf8')) as { version: string }
).version;
/** The adapters, each loaded with re-exports of core from CommonJS and ESM. */
const ADAPTERS = ['express', 'koa', 'fastify', 'hono', 'fetch', 'nestjs'] as const;
let consumer: string;
/** A second project, on the previous major of Nest, with @sentinel/nestjs and core alone. */
let nest11: string;

/**
 * A Nest app limited to one request a minute, in plain JavaScript (decorators applied as
 * functions, which any Nest runs), answering the statuses of two GETs. `load` imports its names.
 */
const nestApp = (load: string) => `${load}
class Routes {
  root(req) { return { remaining: req.rateLimit?.remaining ?? null }; }
}
Req()(Routes.prototype, 'root', 0);
Get()(Routes.prototype, 'root', Object.getOwnPropertyDescriptor(Routes.prototype, 'root'));
Controller()(Routes);
class AppModule {}
Module({
  imports: [SentinelModule.forRoot({ limit: 1, window: '1m' })],
  controllers: [Routes],
  providers: [{ provide: APP_GUARD, useClass: SentinelGuard }],
})(AppModule);
(async () => {
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const statuses = [];
  for (let i = 0; i < 2; i++) statuses.push((await fetch(url)).status);
  await app.close();
  console.log(JSON.stringify(statuses));
})();
`;
const nestEsm = nestApp(`import 'reflect-metadata';
import { Controller, Get, Module, Req } from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { SentinelGuard, SentinelModule } from '@sentinel/nestjs';`);
const nestCjs = nestApp(`require('reflect-metadata');
const { Controller, Get, Module, Req } = require('@nestjs/common');
const { APP_GUARD, NestFactory } = require('@nestjs/core');
const { SentinelGuard, SentinelModule } = require('@sentinel/nestjs');`);

const USE_CORE = `
const limiter = createLimiter({ limit: 2, window: '1m' });
const decisions = [];
for (let i = 0; i < 3; i++) decisions.push((await limiter.consume('a')).allowed);
await limiter.close();
console.log(JSON.stringify({ decisions, algorithms: ALGORITHMS.length, store: typeof MemoryStore }));
`;

/** The files in each package's tarball, as `package/...` paths. */
const packed = new Map<string, string[]>();

/** Every path an `exports` map points to, through its conditions. */
function exportTargets(exports: unknown): string[] {
  if (typeof exports === 'string') return [exports];
  if (exports === null || typeof exports !== 'object') return [];
  return Object.values(exports).flatMap(exportTargets);
}

beforeAll(async () => {
  consumer = await mkdtemp(join(tmpdir(), 'sentinel-consumer-'));
  for (const name of Object.keys(PACKAGES)) {
    await run('pnpm', ['pack', '--pack-destination', consumer], {
      cwd: join(root, `packages/${name}`),
    });
  }
  const tarballs = (await readdir(consumer)).filter((file) => file.endsWith('.tgz'));
  for (const name of Object.keys(PACKAGES)) {
    const tarball = tarballs.find((file) => file.startsWith(`sentinel-${name}-`));
    if (tarball === undefined) throw new Error(`no tarball for @sentinel/${name} in ${tarballs}`);
    const { stdout } = await run('tar', ['-tzf', join(consumer, tarball)]);
    packed.set(name, stdout.trim().split('\n'));
  }
  await writeFile(join(consumer, 'package.json'), '{ "name": "consumer", "private": true }');
  // npm resolves the packages' own dependencies and peers the way a user's install would.
  await run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      ...tarballs.map((t) => `./${t}`),
      // The optional peer that @sentinel/core/prometheus needs, as its user would add it.
      'prom-client@15.1.3',
      // Nest's HTTP platform, which a Nest app adds beside @sentinel/nestjs's peers.
      '@nestjs/platform-express@12',
      // The optional peer `openTelemetry` loads, and the SDK an app registers.
      '@opentelemetry/api@1.9.1',
      '@opentelemetry/sdk-metrics@2.12.1',
    ],
    {
      cwd: consumer,
    },
  );
  await writeFile(join(consumer, 'nest-app.mjs'), nestEsm);
  await writeFile(join(consumer, 'nest-app.cjs'), nestCjs);
  nest11 = await mkdtemp(join(tmpdir(), 'sentinel-nest11-'));
  await writeFile(join(nest11, 'package.json'), '{ "name": "nest11", "private": true }');
  const sentinelTarballs = tarballs.filter((t) => /^sentinel-(core|nestjs)-/.test(t));
  await run(
    'npm',
    [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      ...sentinelTarballs.map((t) => join(consumer, t)),
      '@nestjs/common@11',
      '@nestjs/core@11',
      '@nestjs/platform-express@11',
      'reflect-metadata@0.2',
      'rxjs@7',
    ],
    { cwd: nest11 },
  );
  await writeFile(join(nest11, 'nest-app.mjs'), nestEsm);
  await writeFile(join(nest11, 'nest-app.cjs'), nestCjs);
  await writeFile(
    join(consumer, 'core.mjs'),
    `import { createLimiter, ALGORITHMS, MemoryStore } from '@sentinel/core';\n${USE_CORE}`,
  );
  await writeFile(
    join(consumer, 'core.cjs'),
    `const { createLimiter, ALGORITHMS, MemoryStore } = require('@sentinel/core');\n(async () => {${USE_CORE}})();`,
  );
  const usePrometheus = `const registry = new Registry();
const observer = prometheusMetrics(registry);
observer.decision({ decision: { tier: 'FREE', policy: 'p', policies: [] }, identity: 'a', consumed: true, outcome: 'allowed', storeMs: 1 });
registry.metrics().then((text) => console.log(text.includes('sentinel_decisions_total{tier="FREE",policy="p",outcome="allowed"} 1')));`;
  await writeFile(
    join(consumer, 'prometheus.mjs'),
    `import { prometheusMetrics } from '@sentinel/core/prometheus';
import { Registry } from 'prom-client';
${usePrometheus}`,
  );
  await writeFile(
    join(consumer, 'prometheus.cjs'),
    `const { prometheusMetrics } = require('@sentinel/core/prometheus');
const { Registry } = require('prom-client');
${usePrometheus}`,
  );
  // openTelemetry: counts in the SDK where @opentelemetry/api is installed; a TypeError naming
  // the option where it is not (the Nest 11 project), and nothing lost without the option.
  const useOpenTelemetry = `const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3600000 });
const meterProvider = new MeterProvider({ readers: [reader] });
const limiter = createLimiter({ limit: 2, window: '1m', openTelemetry: { meterProvider } });
(async () => {
  for (let i = 0; i < 3; i++) await limiter.consume('k');
  await reader.forceFlush();
  const counts = {};
  for (const r of exporter.getMetrics()) for (const s of r.scopeMetrics) for (const m of s.metrics) {
    if (m.descriptor.name === 'sentinel.decisions') for (const p of m.dataPoints) counts[p.attributes['sentinel.result']] = p.value;
  }
  console.log(JSON.stringify(counts));
})();`;
  await writeFile(
    join(consumer, 'otel.mjs'),
    `import { createLimiter } from '@sentinel/core';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
${useOpenTelemetry}`,
  );
  await writeFile(
    join(consumer, 'otel.cjs'),
    `const { createLimiter } = require('@sentinel/core');
const { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } = require('@opentelemetry/sdk-metrics');
${useOpenTelemetry}`,
  );
  const withoutApi = `const plain = createLimiter({ limit: 1, window: '1m' });
let thrown;
try { createLimiter({ limit: 1, window: '1m', openTelemetry: true }); } catch (error) { thrown = error; }
plain.consume('k').then((d) => console.log(JSON.stringify({ allowed: d.allowed, type: thrown?.constructor.name, message: thrown?.message })));`;
  await writeFile(
    join(nest11, 'no-otel.mjs'),
    `import { createLimiter } from '@sentinel/core';\n${withoutApi}`,
  );
  await writeFile(
    join(nest11, 'no-otel.cjs'),
    `const { createLimiter } = require('@sentinel/core');\n${withoutApi}`,
  );
  for (const [name, entry] of Object.entries(PACKAGES)) {
    if (name === 'core' || name === 'rls') continue;
    const check = `console.log(typeof ${entry} + ' ' + typeof byApiKey + ' ' + typeof RedisStore);`;
    await writeFile(
      join(consumer, `${name}.mjs`),
      `import { ${entry}, byApiKey, RedisStore } from '@sentinel/${name}';\n${check}`,
    );
    await writeFile(
      join(consumer, `${name}.cjs`),
      `const { ${entry}, byApiKey, RedisStore } = require('@sentinel/${name}');\n${check}`,
    );
  }
  const typed = `import { createLimiter, type Decision, type LimiterOptions } from '@sentinel/core';
import { prometheusMetrics } from '@sentinel/core/prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
const options: LimiterOptions = {
  tiers: { FREE: { limit: 10, window: '1m' } },
  observe: [prometheusMetrics(), { decision: ({ outcome }) => outcome.length }],
  openTelemetry: { meterProvider: new MeterProvider() },
};
const decision: Promise<Decision> = createLimiter(options).consume('key', { tier: 'FREE' });
export { decision };
`;
  await writeFile(join(consumer, 'typed.mts'), typed);
  await writeFile(join(consumer, 'typed.cts'), typed);
  // The fetch API adapters' types, against Hono's own as npm installed it beside them (a peer).
  const typedFetchApi = `import { withRateLimit, decisionOf, type WithRateLimitOptions } from '@sentinel/fetch';
import { rateLimit, type RateLimitVariables } from '@sentinel/hono';
import { Hono } from 'hono';
const app = new Hono<{ Variables: RateLimitVariables<'apiLimit'> }>();
app.use(rateLimit({ limit: 10, window: '1m', trustProxy: 1, contextKey: 'apiLimit' }));
app.get('/', (c) => c.json({ remaining: c.get('apiLimit')?.remaining ?? null }));
const options: WithRateLimitOptions = { limit: 10, window: '1m', trustProxy: 'loopback' };
const handler = withRateLimit(
  (request: Request) => Response.json({ remaining: decisionOf(request)?.remaining ?? null }),
  options,
);
export { app, handler };
`;
  await writeFile(join(consumer, 'fetch-api.mts'), typedFetchApi);
  await writeFile(join(consumer, 'fetch-api.cts'), typedFetchApi);
  // Each pack builds its package first: the seven packs took 67 s at a load of 16 on 2 cores,
  // and beside the conformance suite, packs and install passed 180 s.
}, 600_000);

afterAll(async () => {
  if (consumer) await rm(consumer, { recursive: true, force: true });
  if (nest11) await rm(nest11, { recursive: true, force: true });
});

describe('the packed packages', () => {
  it.each(Object.keys(PACKAGES))(
    'ship dist, the README, the LICENSE and the manifest, and nothing else, for @sentinel/%s',
    (name) => {
      const files = packed.get(name) ?? [];
      expect(files).toEqual(
        expect.arrayContaining([
          'package/package.json',
          'package/README.md',
          'package/LICENSE',
          'package/dist/index.mjs',
          'package/dist/index.cjs',
          'package/dist/index.d.mts',
          'package/dist/index.d.cts',
        ]),
      );
      const extra = files.filter(
        (file) =>
          !file.startsWith('package/dist/') &&
          // sentinel-rls loads Envoy's protos at run time.
          !(name === 'rls' && file.startsWith('package/proto/')) &&
          !['package/package.json', 'package/README.md', 'package/LICENSE'].includes(file),
      );
      expect(extra).toEqual([]);
    },
  );

  it.each(Object.keys(PACKAGES))(
    'ship every file the manifest of @sentinel/%s exports',
    async (name) => {
      const installed = join(consumer, `node_modules/@sentinel/${name}`);
      const manifest = JSON.parse(await readFile(join(installed, 'package.json'), 'utf8'));
      const targets = exportTargets(manifest.exports);
      // The published manifest points at dist, never at the TypeScript sources.
      expect(targets.filter((target) => !target.startsWith('./dist/'))).toEqual(['./package.json']);
      const files = packed.get(name) ?? [];
      const entries = [manifest.main, manifest.module, manifest.types].filter(Boolean);
      for (const target of [...targets, ...entries] as string[]) {
        expect(files, target).toContain(`package/${target.slice(2)}`);
      }
    },
  );

  it.each(Object.keys(PACKAGES))(
    'ship a README that shows how to install @sentinel/%s, and the MIT license',
    async (name) => {
      const installed = join(consumer, `node_modules/@sentinel/${name}`);
      const readme = await readFile(join(installed, 'README.md'), 'utf8');
      expect(readme).toMatch(new RegExp(`^# @sentinel/${name}\\n`));
      expect(readme).toContain(`npm install @sentinel/${name}`);
      expect(readme).toContain(`from '@sentinel/${name}'`);
      // Nothing outside the tarball: a relative link into the repository would not resolve.
      expect(readme).not.toMatch(/\]\(\.\.?\//);
      const license = await readFile(join(installed, 'LICENSE'), 'utf8');
      expect(license).toMatch(/^MIT License\n\nCopyright \(c\) 2026 The Sentinel authors\n/);
    },
  );

  it.each(['core.mjs', 'core.cjs'])('run the core from %s', async (file) => {
    const { stdout } = await run(process.execPath, [file], { cwd: consumer });
    expect(JSON.parse(stdout)).toEqual({
      decisions: [true, true, false],
      algorithms: 5,
      store: 'function',
    });
  });

  it.each(['prometheus.mjs', 'prometheus.cjs'])(
    'run the Prometheus helper from %s',
    async (file) => {
      const { stdout } = await run(process.execPath, [file], { cwd: consumer });
      expect(stdout.trim()).toBe('true');
    },
  );

  it.each(['otel.mjs', 'otel.cjs'])(
    'count decisions in an OpenTelemetry SDK from %s',
    async (file) => {
      const { stdout } = await run(process.execPath, [file], { cwd: consumer });
      expect(JSON.parse(stdout)).toEqual({ allowed: 2, limited: 1 });
    },
  );

  it.each(['no-otel.mjs', 'no-otel.cjs'])(
    'without @opentelemetry/api, limit as ever, and refuse `openTelemetry` with a TypeError, from %s',
    async (file) => {
      // Without the NODE_PATH a package manager's run sets, which would find the repository's own.
      const { NODE_PATH: _, ...env } = process.env;
      const { stdout } = await run(process.execPath, [file], { cwd: nest11, env });
      expect(JSON.parse(stdout)).toEqual({
        allowed: true,
        type: 'TypeError',
        message: expect.stringMatching(/openTelemetry.*npm install @opentelemetry\/api/),
      });
    },
  );

  it.each(ADAPTERS.flatMap((name) => [`${name}.mjs`, `${name}.cjs`]))(
    'load the adapter and its re-exports from %s',
    async (file) => {
      const { stdout } = await run(process.execPath, [file], { cwd: consumer });
      expect(stdout.trim()).toBe('function function function');
    },
  );

  it.each([
    ['12', 'nest-app.mjs'],
    ['12', 'nest-app.cjs'],
    ['11', 'nest-app.mjs'],
    ['11', 'nest-app.cjs'],
  ])('limit a Nest %s app from %s', async (major, file) => {
    const cwd = major === '11' ? nest11 : consumer;
    const manifest = JSON.parse(
      await readFile(join(cwd, 'node_modules/@nestjs/core/package.json'), 'utf8'),
    );
    expect(manifest.version).toMatch(new RegExp(`^${major}[.]`));
    const { stdout } = await run(process.execPath, [file], { cwd });
    expect(JSON.parse(stdout)).toEqual([200, 429]);
  });

  it.each(['typed.mts', 'typed.cts', 'fetch-api.mts', 'fetch-api.cts'])(
    'have types that resolve from %s',
    async (file) => {
      const tsc = join(root, 'node_modules/typescript/bin/tsc');
      const args = [
        '--noEmit',
        '--strict',
        '--module',
        'node16',
        '--moduleResolution',
        'node16',
        file,
      ];
      const result = await run(process.execPath, [tsc, ...args], { cwd: consumer }).catch(
        (error: { stdout: string }) => error,
      );
      expect(result.stdout).toBe('');
    },
    // tsc checks the DOM and ES libraries with each file: 19 s for fetch-api.mts on a 2-core
    // machine at a load of 16, past vitest's 30 s beside a second file.
    120_000,
  );
  it('run `npx sentinel-rls`: its help, and the service on the memory store', async () => {
    const help = await run('npx', ['--no-install', 'sentinel-rls', '--help'], { cwd: consumer });
    expect(help.stdout).toContain('GRPC_PORT');
    await writeFile(
      join(consumer, 'ratelimit.yaml'),
      'domain: api\ndescriptors:\n  - key: tenant\n    rate_limit: { unit: minute, requests_per_unit: 1 }\n',
    );
    // A process group of its own: npx does not pass SIGTERM on to the service it started.
    const child = spawn('npx', ['--no-install', 'sentinel-rls', '--config', 'ratelimit.yaml'], {
      cwd: consumer,
      env: { ...process.env, GRPC_PORT: '0', PORT: '0', REDIS_URL: '' },
      detached: true,
    });
    try {
      const ready = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk) => {
          out += chunk;
          if (out.includes('sentinel-rls ready')) resolve(out);
        });
        child.once('exit', (code) => reject(new Error(`exited with ${code}`)));
      });
      const port = Number(/http=[^:]+:(\d+)/.exec(ready)?.[1]);
      const ask = () =>
        fetch(`http://127.0.0.1:${port}/json`, {
          method: 'POST',
          body: JSON.stringify({
            domain: 'api',
            descriptors: [{ entries: [{ key: 'tenant', value: 'a' }] }],
          }),
        }).then((r) => r.status);
      expect([await ask(), await ask()]).toEqual([200, 429]);
    } finally {
      try {
        process.kill(-(child.pid as number), 'SIGTERM');
      } catch {
        // Gone already.
      }
    }
  });

  it('run the sentinel-rls bin with TRACING_ENABLED and OTEL_METRICS_EXPORTER: its SDK is installed, and a span and the counts exported', async () => {
    const receiver = await startHttpReceiver();
    // The bin itself, not through npx, so that SIGTERM reaches it and it flushes.
    const bin = join(consumer, 'node_modules/@sentinel/rls/dist/bin.mjs');
    const child = spawn(process.execPath, [bin, '--config', 'ratelimit.yaml'], {
      cwd: consumer,
      env: {
        ...process.env,
        GRPC_PORT: '0',
        PORT: '0',
        REDIS_URL: '',
        TRACING_ENABLED: 'true',
        OTEL_METRICS_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      },
    });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk) => {
          out += chunk;
          const ready = /sentinel-rls ready: .* http=[^:]+:(\d+)/.exec(out);
          if (ready) resolve(Number(ready[1]));
        });
        child.once('exit', (code) => reject(new Error(`exited with ${code}`)));
      });
      const status = await fetch(`http://127.0.0.1:${port}/json`, {
        method: 'POST',
        body: JSON.stringify({
          domain: 'api',
          descriptors: [{ entries: [{ key: 'tenant', value: 'b' }] }],
        }),
      }).then((r) => r.status);
      expect(status).toBe(200);
      // Stopped, it exports the span the batch holds, and the counts a last time.
      await new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill('SIGTERM');
      });
      expect(receiver.spans.map((span) => span.name)).toEqual(['ShouldRateLimit Execution']);
      const hits = receiver.metricExports
        .at(-1)
        ?.find((metric) => metric.name === 'ratelimit.service.rate_limit.total_hits');
      // The scope's version is read from the installed package's manifest.
      expect(hits).toMatchObject({
        scope: '@sentinel/rls',
        scopeVersion: RLS_VERSION,
        points: [{ attributes: { domain: 'api', key1: 'tenant' }, value: 1 }],
      });
    } finally {
      child.kill('SIGTERM');
      await receiver.close();
    }
  });
});
