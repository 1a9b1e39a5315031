// Between the objects proto-loader decodes and encodes (camelCase, enums and 64-bit integers as
// numbers, absent messages as null) and the messages `decide` sees.
import type {
  DescriptorStatusMessage,
  HeaderValueMessage,
  JsonValue,
  QuotaMessage,
  RateLimitRequestMessage,
  RateLimitResponseMessage,
} from './messages.ts';
import {
  codeNumber,
  durationOf,
  type SecondsAndNanos,
  timestampOf,
  uint32,
  unitNumber,
  unitOfNumber,
} from './wire-values.ts';

/** A RateLimitRequest as proto-loader decodes it with `defaults: true`. */
export interface WireRequest {
  domain: string;
  descriptors: Array<{
    entries: Array<{ key: string; value: string }>;
    limit: { requestsPerUnit: number; unit: number } | null;
    hitsAddend: { value: number } | null;
    isNegativeHits: boolean;
  }>;
  hitsAddend: number;
}

/** google.protobuf.Value: one of its kinds set. */
type WireValue =
  | { nullValue: 0 }
  | { numberValue: number }
  | { stringValue: string }
  | { boolValue: boolean }
  | { structValue: WireStruct }
  | { listValue: { values: WireValue[] } };

interface WireStruct {
  fields: Record<string, WireValue>;
}

export function requestFromWire(wire: WireRequest): RateLimitRequestMessage {
  return {
    domain: wire.domain,
    descriptors: wire.descriptors.map((descriptor) => ({
      entries: descriptor.entries.map(({ key, value }) => ({ key, value })),
      limit:
        descriptor.limit === null
          ? undefined
          : {
              requestsPerUnit: descriptor.limit.requestsPerUnit,
              unit: unitOfNumber(descriptor.limit.unit),
            },
      hitsAddend: descriptor.hitsAddend?.value,
      isNegativeHits: descriptor.isNegativeHits,
    })),
    hitsAddend: wire.hitsAddend,
  };
}

/** The object proto-loader encodes as a RateLimitResponse; throws a TypeError on a bad field. */
export function responseToWire(response: RateLimitResponseMessage): object {
  return {
    overallCode: scalar(codeNumber(response.overallCode, 'overallCode')),
    statuses: (response.statuses ?? []).map((status, i) => statusToWire(status, `statuses[${i}]`)),
    responseHeadersToAdd: (response.responseHeadersToAdd ?? []).map(headerToWire),
    requestHeadersToAdd: (response.requestHeadersToAdd ?? []).map(headerToWire),
    rawBody: scalar(response.rawBody),
    dynamicMetadata:
      response.dynamicMetadata === undefined ? undefined : structToWire(response.dynamicMetadata),
    quota: response.quota === undefined ? undefined : quotaToWire(response.quota, 'quota'),
  };
}

function statusToWire(status: DescriptorStatusMessage, field: string): object {
  const limit = status.currentLimit;
  return {
    code: scalar(codeNumber(status.code, `${field}.code`)),
    currentLimit:
      limit === undefined
        ? undefined
        : {
            name: scalar(limit.name),
            requestsPerUnit: scalar(
              uint32(limit.requestsPerUnit, `${field}.currentLimit.requestsPerUnit`),
            ),
            unit: scalar(unitNumber(limit.unit, `${field}.currentLimit.unit`)),
          },
    limitRemaining: scalar(uint32(status.limitRemaining, `${field}.limitRemaining`)),
    durationUntilReset:
      status.durationUntilResetMs === undefined
        ? undefined
        : secondsToWire(durationOf(status.durationUntilResetMs, `${field}.durationUntilResetMs`)),
    quota: status.quota === undefined ? undefined : quotaToWire(status.quota, `${field}.quota`),
  };
}

function quotaToWire(quota: QuotaMessage, field: string): object {
  return {
    requests: scalar(uint32(quota.requests, `${field}.requests`)),
    ...(quota.validUntilMs === undefined
      ? {}
      : { validUntil: secondsToWire(timestampOf(quota.validUntilMs, `${field}.validUntilMs`)) }),
    id: scalar(quota.id),
  };
}

function headerToWire({ key, value, rawValue }: HeaderValueMessage): object {
  return { key: scalar(key), value: scalar(value), rawValue: scalar(rawValue) };
}

function secondsToWire({ seconds, nanos }: SecondsAndNanos): object {
  return { seconds: scalar(seconds), nanos: scalar(nanos) };
}

/**
 * A field outside a oneof, left out at its default: protobufjs writes every field that is set,
 * even to its default, where proto3 writes none, and envoyproxy/ratelimit none.
 */
function scalar<T extends number | string | Uint8Array>(value: T | undefined): T | undefined {
  if (value === 0 || value === '') return undefined;
  return value instanceof Uint8Array && value.length === 0 ? undefined : value;
}

function structToWire(object: { readonly [key: string]: JsonValue }): WireStruct {
  const fields: Record<string, WireValue> = {};
  for (const [key, value] of Object.entries(object)) {
    // Left out, as JSON.stringify leaves out an undefined property.
    if (value !== undefined) fields[key] = valueToWire(value);
  }
  return { fields };
}

function valueToWire(value: JsonValue): WireValue {
  if (value === null) return { nullValue: 0 };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(valueToWire) } };
  if (typeof value !== 'object') {
    throw new TypeError(`dynamicMetadata: a google.protobuf.Struct holds no ${typeof value}`);
  }
  return { structValue: structToWire(value as { readonly [key: string]: JsonValue }) };
}
