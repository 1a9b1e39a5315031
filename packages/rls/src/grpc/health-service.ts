// grpc.health.v1.Health for a fixed set of service names that are all serving or all not, as
// the standard protocol (grpc/grpc, doc/health-checking.md) describes Check and Watch.
import {
  type ServerUnaryCall,
  type ServerWritableStream,
  type sendUnaryData,
  status,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';

/** HealthCheckResponse.ServingStatus's numbers. */
const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;

interface HealthCheckRequest {
  service: string;
}

interface HealthCheckResponse {
  status: number;
}

export interface HealthService {
  readonly implementation: UntypedServiceImplementation;
  /** Every known service turns SERVING or NOT_SERVING, and each Watch hears of the change. */
  setServing(serving: boolean): void;
  /** Ends every Watch, so that the server's shutdown does not wait for them. */
  endWatches(): void;
}

export function createHealthService(services: readonly string[]): HealthService {
  const known = new Set(services);
  const watches = new Set<ServerWritableStream<HealthCheckRequest, HealthCheckResponse>>();
  let serving = true;

  const statusOf = (service: string): number =>
    known.has(service) ? (serving ? SERVING : NOT_SERVING) : SERVICE_UNKNOWN;

  function check(
    call: ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
    callback: sendUnaryData<HealthCheckResponse>,
  ): void {
    const service = call.request.service;
    if (!known.has(service)) {
      callback({ code: status.NOT_FOUND, details: `unknown service ${JSON.stringify(service)}` });
      return;
    }
    callback(null, { status: statusOf(service) });
  }

  // An unknown service is answered SERVICE_UNKNOWN and the call stays open, as the protocol says:
  // the service may be registered later (here it never is, but a client cannot know that).
  function watch(call: ServerWritableStream<HealthCheckRequest, HealthCheckResponse>): void {
    watches.add(call);
    call.on('cancelled', () => watches.delete(call));
    call.write({ status: statusOf(call.request.service) });
  }

  return {
    implementation: { Check: check, Watch: watch },
    setServing(next) {
      if (next === serving) return;
      serving = next;
      for (const call of watches) {
        if (known.has(call.request.service)) call.write({ status: statusOf(call.request.service) });
      }
    },
    endWatches() {
      for (const call of watches) call.end();
      watches.clear();
    },
  };
}
