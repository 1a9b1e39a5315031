// The gateway process: reads its configuration, starts, prints how to try it, and stops on a signal.
import type { AnyPolicyOptions, TierOptions } from '@sentinel/fastify';
import { ConfigError, type GatewayConfig, isLoopback, loadConfig } from './config.ts';
import type { EchoUpstream } from './echo-upstream.ts';
import type { Gateway } from './gateway.ts';
import { startTelemetry } from './telemetry.ts';

// First, before anything loads node:http: the SDK's HTTP instrumentation wraps its server.
const telemetry = await startTelemetry();
const { startEchoUpstream } = await import('./echo-upstream.ts');
const { buildGateway } = await import('./gateway.ts');

/** Past this, a shutdown still waiting on requests gives up on them. */
const SHUTDOWN_DEADLINE_MS = 10_000;

/** A start-up mistake ends here: one line naming what to fix, no stack trace, exit code 1. */
function stop(message: string): never {
  console.error(message);
  process.exit(1);
}

/** Sentinel names the option in its TypeErrors; the file tells the user where that option is. */
function isSentinelOptionError(error: unknown): error is TypeError {
  return error instanceof TypeError && error.message.startsWith('@sentinel/');
}

let config: GatewayConfig;
try {
  config = loadConfig();
} catch (error) {
  if (error instanceof ConfigError) stop(error.message);
  throw error;
}

const echo: EchoUpstream | undefined = config.upstream ? undefined : await startEchoUpstream();
let gateway: Gateway;
let address: string;
try {
  const upstream = config.upstream ?? (echo as EchoUpstream).url;
  gateway = await buildGateway({ ...config, upstream });
  address = await gateway.app.listen({ host: config.host, port: config.port });
} catch (error) {
  if (isSentinelOptionError(error)) stop(`${config.file ?? 'config'}: ${error.message}`);
  stop(`cannot start the gateway: ${error instanceof Error ? error.message : String(error)}`);
}

printBanner(config, address, echo);

async function shutdown(signal: string): Promise<void> {
  gateway.app.log.info({ signal }, 'shutting down: draining requests in flight');
  setTimeout(
    () => stop('shutdown: requests still in flight after 10 s'),
    SHUTDOWN_DEADLINE_MS,
  ).unref();
  await gateway.close();
  await echo?.close();
  // Sends the spans and metrics the SDK still holds.
  await telemetry?.shutdown();
  process.exit(0);
}
process.once('SIGTERM', (signal) => void shutdown(signal));
process.once('SIGINT', (signal) => void shutdown(signal));

function printBanner(config: GatewayConfig, address: string, echo: EchoUpstream | undefined) {
  const cluster = Array.isArray(config.redisUrl);
  // The URLs may hold a password: the banner names the variable, not its value.
  const store = config.redisUrl
    ? `Redis ${cluster ? 'Cluster (REDIS_CLUSTER_NODES)' : '(REDIS_URL)'}`
    : 'memory (this process only; set REDIS_URL to share limits)';
  const lines = [
    `Sentinel gateway listening on ${address}`,
    `  upstream: ${echo ? `built-in echo at ${echo.url}` : config.upstream}`,
    `  store:    ${store}`,
    `  health:   ${address}/healthz  ${address}/readyz  ${address}/metrics`,
  ];
  if (config.statusPage) {
    const guarded = isLoopback(config.host) ? '' : '  (asks for the admin token)';
    lines.push(`  status:   ${address}/_sentinel${guarded}`);
  }
  if (config.adminToken !== undefined) {
    lines.push(
      `  admin:    ${address}/_sentinel/identities/<key>  (Authorization: Bearer <token>)`,
    );
  }
  if (config.demoKeys) {
    const tiers = config.limiter.tiers as Record<string, TierOptions>;
    lines.push('Demo API keys (send as x-api-key or Authorization: Bearer):');
    for (const [key, { tier }] of config.keys) {
      lines.push(`  ${tier.padEnd(10)} ${key.padEnd(20)} ${describeTier(tiers[tier])}`);
    }
    const free = [...config.keys].find(([, { tier }]) => tier === 'FREE');
    if (free) {
      lines.push(
        `Try it; past FREE's limit (${describeTier(tiers.FREE)}) the answer is 429:`,
        `  curl -i ${address}/hello -H 'x-api-key: ${free[0]}'`,
      );
    }
  }
  console.log(lines.join('\n'));
}

/** `10 per 1m` or `100 per 1m + 20 per 1s`. */
function describeTier(tier: TierOptions | undefined): string {
  const policies: readonly AnyPolicyOptions[] = tier === undefined ? [] : [tier].flat();
  return policies
    .map((p) => ('concurrency' in p ? `${p.concurrency} in flight` : `${p.limit} per ${p.window}`))
    .join(' + ');
}
