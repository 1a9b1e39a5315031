// A client of the rate limit service that shares nothing with the server but grpc-js's transport:
// its messages are encoded by protobufjs from the descriptor below, whose field numbers are
// copied from Envoy's .proto files, so a wrong number in packages/rls/proto shows as a wrong field.
import { createRequire } from 'node:module';
import type * as GrpcJs from '../../packages/rls/node_modules/@grpc/grpc-js/build/src/index.js';

/** The little of protobufjs used here. */
interface ProtoType {
  fromObject(object: object): unknown;
  encode(message: unknown): { finish(): Uint8Array };
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: object): Record<string, unknown>;
}

// pnpm resolves @sentinel/rls's dependencies from its own folder only, and protobufjs from
// proto-loader's.
const fromRls = createRequire(new URL('../../packages/rls/package.json', import.meta.url));
export const grpc = fromRls('@grpc/grpc-js') as typeof GrpcJs;
const protobuf = createRequire(fromRls.resolve('@grpc/proto-loader'))('protobufjs') as {
  Root: { fromJSON(json: object): { lookupType(name: string): ProtoType } };
};

const field = (type: string, id: number) => ({ type, id });
const repeated = (type: string, id: number) => ({ rule: 'repeated', type, id });

/** Envoy's messages, flattened into one namespace; names as in the .proto, numbers as in Envoy. */
const root = protobuf.Root.fromJSON({
  nested: {
    RateLimitRequest: {
      fields: {
        domain: field('string', 1),
        descriptors: repeated('RateLimitDescriptor', 2),
        hits_addend: field('uint32', 3),
      },
    },
    RateLimitDescriptor: {
      fields: {
        entries: repeated('Entry', 1),
        limit: field('RateLimitOverride', 2),
        hits_addend: field('UInt64Value', 3),
        is_negative_hits: field('bool', 4),
      },
    },
    Entry: { fields: { key: field('string', 1), value: field('string', 2) } },
    RateLimitOverride: {
      fields: { requests_per_unit: field('uint32', 1), unit: field('RateLimitUnit', 2) },
    },
    RateLimitUnit: {
      values: { UNKNOWN: 0, SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6 },
    },
    UInt64Value: { fields: { value: field('uint64', 1) } },
    RateLimitResponse: {
      fields: {
        overall_code: field('Code', 1),
        statuses: repeated('DescriptorStatus', 2),
        response_headers_to_add: repeated('HeaderValue', 3),
        request_headers_to_add: repeated('HeaderValue', 4),
        raw_body: field('bytes', 5),
        dynamic_metadata: field('Struct', 6),
        quota: field('Quota', 7),
      },
    },
    Code: { values: { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 } },
    Unit: {
      values: { UNKNOWN: 0, SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6, WEEK: 7 },
    },
    RateLimit: {
      fields: {
        name: field('string', 3),
        requests_per_unit: field('uint32', 1),
        unit: field('Unit', 2),
      },
    },
    DescriptorStatus: {
      fields: {
        code: field('Code', 1),
        current_limit: field('RateLimit', 2),
        limit_remaining: field('uint32', 3),
        duration_until_reset: field('Duration', 4),
        quota: field('Quota', 5),
      },
    },
    Quota: {
      fields: {
        requests: field('uint32', 1),
        valid_until: field('Timestamp', 2),
        id: field('string', 3),
      },
    },
    HeaderValue: {
      fields: { key: field('string', 1), value: field('string', 2), raw_value: field('bytes', 3) },
    },
    Duration: { fields: { seconds: field('int64', 1), nanos: field('int32', 2) } },
    Timestamp: { fields: { seconds: field('int64', 1), nanos: field('int32', 2) } },
    Struct: { fields: { fields: { keyType: 'string', type: 'Value', id: 1 } } },
    Value: {
      fields: {
        null_value: field('NullValue', 1),
        number_value: field('double', 2),
        string_value: field('string', 3),
        bool_value: field('bool', 4),
        struct_value: field('Struct', 5),
        list_value: field('ListValue', 6),
      },
    },
    NullValue: { values: { NULL_VALUE: 0 } },
    ListValue: { fields: { values: repeated('Value', 1) } },
    HealthCheckRequest: { fields: { service: field('string', 1) } },
    HealthCheckResponse: { fields: { status: field('ServingStatus', 1) } },
    ServingStatus: { values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } },
  },
});

/** Encodes and decodes one message type; decoded, a field at its default is left out. */
function codec(name: string) {
  const type = root.lookupType(name);
  return {
    serialize: (value: object) => Buffer.from(type.encode(type.fromObject(value)).finish()),
    deserialize: (bytes: Buffer) =>
      type.toObject(type.decode(bytes), { longs: Number, enums: String }),
  };
}

const request = codec('RateLimitRequest');
const response = codec('RateLimitResponse');
const healthRequest = codec('HealthCheckRequest');
const healthResponse = codec('HealthCheckResponse');

const SHOULD_RATE_LIMIT = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const HEALTH = '/grpc.health.v1.Health';

/** A RateLimitRequest, RateLimitResponse or HealthCheckResponse, with the .proto's field names. */
export type Wire = Record<string, unknown>;

/** Watch's answers, one at a time. */
export interface Watch {
  next(): Promise<string>;
  cancel(): void;
}

export interface RlsClient {
  /** Rejects with the call's ServiceError; `deadlineMs` from now, if given; `metadata` sent. */
  shouldRateLimit(
    message: Wire,
    deadlineMs?: number,
    metadata?: Readonly<Record<string, string>>,
  ): Promise<Wire>;
  /** The serving status Check answers, by name. */
  check(service: string): Promise<string>;
  watch(service: string): Watch;
  close(): void;
}

export function rlsClient(port: number): RlsClient {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const unary =
    (path: string, send: ReturnType<typeof codec>, receive: ReturnType<typeof codec>) =>
    (message: Wire, deadlineMs?: number, metadata: Readonly<Record<string, string>> = {}) =>
      new Promise<Wire>((resolve, reject) => {
        const sent = new grpc.Metadata();
        for (const [key, value] of Object.entries(metadata)) sent.set(key, value);
        client.makeUnaryRequest(
          path,
          send.serialize,
          receive.deserialize,
          message,
          sent,
          deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs },
          (error, reply) => (error || reply === undefined ? reject(error) : resolve(reply)),
        );
      });
  const check = unary(`${HEALTH}/Check`, healthRequest, healthResponse);
  return {
    shouldRateLimit: unary(SHOULD_RATE_LIMIT, request, response),
    check: async (service) => String((await check({ service })).status ?? 'UNKNOWN'),
    watch(service) {
      const stream = client.makeServerStreamRequest(
        `${HEALTH}/Watch`,
        healthRequest.serialize,
        healthResponse.deserialize,
        { service },
      );
      const heard: string[] = [];
      const waiting: Array<(status: string) => void> = [];
      const hear = (status: string) => {
        const next = waiting.shift();
        if (next) next(status);
        else heard.push(status);
      };
      stream.on('data', (reply: Wire) => hear(String(reply.status ?? 'UNKNOWN')));
      // The server ends a watch when it closes; a cancelled one ends with CANCELLED.
      stream.on('end', () => hear('ENDED'));
      stream.on('error', () => hear('ENDED'));
      return {
        next: () =>
          heard.length > 0
            ? Promise.resolve(heard.shift() as string)
            : new Promise((resolve) => waiting.push(resolve)),
        cancel: () => stream.cancel(),
      };
    },
    close: () => client.close(),
  };
}
