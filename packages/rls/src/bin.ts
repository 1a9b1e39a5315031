#!/usr/bin/env node
// sentinel-rls: Envoy's rate limit service, configured by the environment and YAML files as the
// reference service is. Exits 1 with one line on a bad setting or configuration.
import { ConfigError } from './config/config-error.ts';
import { startRateLimitService } from './service.ts';
import { HELP, readSettings, SettingsError } from './settings.ts';

async function main(): Promise<void> {
  const settings = readSettings(process.env, process.argv.slice(2));
  if (settings.help) {
    process.stdout.write(HELP);
    return;
  }
  const service = await startRateLimitService(settings);
  // What scripts and tests wait for: both listeners are up.
  process.stdout.write(
    `sentinel-rls ready: grpc=${settings.grpcHost}:${service.grpcPort} http=${settings.host}:${service.httpPort}\n`,
  );
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    service.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((error: unknown) => {
  const known = error instanceof SettingsError || error instanceof ConfigError;
  process.stderr.write(`sentinel-rls: ${known ? (error as Error).message : String(error)}\n`);
  if (!known && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
