// OpenTelemetry for the gateway: with an OTLP endpoint in the environment, the SDK exports traces
// and metrics as its standard OTEL_* variables say, with a server span for every request, and
// Sentinel's `openTelemetry` reports into them. Loaded only then: otherwise nothing is imported.

/** Stops the SDK, sending what it still holds. */
export interface GatewayTelemetry {
  shutdown(): Promise<void>;
}

/** Whether the environment names an OTLP endpoint, for every signal or for traces or metrics. */
export function otlpConfigured(env: NodeJS.ProcessEnv): boolean {
  return [
    'OTEL_EXPORTER_OTLP_ENDPOINT',
    'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT',
  ].some((name) => Boolean(env[name]));
}

/**
 * Starts the OpenTelemetry SDK when an OTLP endpoint is configured. Call it before the gateway's
 * modules load `node:http`, whose server the HTTP instrumentation wraps to make a span of each
 * request.
 */
export async function startTelemetry(
  env: NodeJS.ProcessEnv = process.env,
): Promise<GatewayTelemetry | undefined> {
  if (!otlpConfigured(env)) return undefined;
  const [{ NodeSDK }, { HttpInstrumentation }] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/instrumentation-http'),
  ]);
  const sdk = new NodeSDK({
    // OTEL_SERVICE_NAME, when set, names it instead.
    ...(!env.OTEL_SERVICE_NAME && { serviceName: 'sentinel-gateway' }),
    instrumentations: [new HttpInstrumentation()],
  });
  sdk.start();
  return { shutdown: () => sdk.shutdown() };
}
