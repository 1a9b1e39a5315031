// ShouldRateLimit in proto3 JSON, for the HTTP `/json` endpoint, as envoyproxy/ratelimit's own
// reads and writes it with protojson: a request by either field spelling, unknown fields refused;
// a response in lowerCamelCase, enums by name, defaults left out.
import type {
  Code,
  DescriptorStatusMessage,
  HeaderValueMessage,
  JsonValue,
  LimitUnit,
  QuotaMessage,
  RateLimitDescriptorMessage,
  RateLimitRequestMessage,
  RateLimitResponseMessage,
} from './messages.ts';
import {
  codeNumber,
  durationJson,
  durationOf,
  timestampJson,
  timestampOf,
  uint32,
  unitNumber,
  unitOfNumber,
} from './wire-values.ts';

/** A body that is not a RateLimitRequest in proto3 JSON: the `/json` endpoint answers 400. */
export class RequestJsonError extends Error {
  override readonly name = 'RequestJsonError';

  constructor(
    /** Where in the body, as `descriptors[0].limit.unit`; '' for the body itself. */
    readonly field: string,
    problem: string,
  ) {
    super(`invalid RateLimitRequest JSON${field === '' ? '' : ` at ${field}`}: ${problem}`);
  }
}

/**
 * The request a parsed `/json` body stands for. Fields may be spelled in lowerCamelCase or as in
 * the .proto, numbers may be quoted, enums given by name or number, and null is a default.
 * @throws {RequestJsonError} for anything protojson would refuse.
 */
export function requestFromJson(body: unknown): RateLimitRequestMessage {
  const fields = readMessage(body, '', REQUEST);
  return {
    domain: readString(fields.domain, 'domain'),
    descriptors: readList(fields.descriptors, 'descriptors').map(readDescriptor),
    hitsAddend: readUnsigned(fields.hitsAddend, 'hitsAddend', UINT32_MAX),
  };
}

/**
 * A response in proto3 JSON, as protojson writes it: lowerCamelCase, enums by name, Durations
 * as "1.500s", bytes in base64, and every field at its default left out.
 * @throws {TypeError} for a value its field cannot hold, as the gRPC encoding would.
 */
export function responseToJson(response: RateLimitResponseMessage): Record<string, unknown> {
  return present({
    overallCode: codeJson(response.overallCode, 'overallCode'),
    statuses: listJson(response.statuses, (status, i) => statusJson(status, `statuses[${i}]`)),
    responseHeadersToAdd: listJson(response.responseHeadersToAdd, headerJson),
    requestHeadersToAdd: listJson(response.requestHeadersToAdd, headerJson),
    rawBody: bytesJson(response.rawBody),
    dynamicMetadata:
      response.dynamicMetadata === undefined
        ? undefined
        : structJson(response.dynamicMetadata, 'dynamicMetadata'),
    quota: response.quota === undefined ? undefined : quotaJson(response.quota, 'quota'),
  });
}

/**
 * The HTTP status envoyproxy/ratelimit's `/json` gives a response: 429 over the limit, 500 for
 * an UNKNOWN code, 200 otherwise. A bad body is its 400, and so is an error from the service.
 */
export function httpStatusOf(response: RateLimitResponseMessage): 200 | 429 | 500 {
  if (response.overallCode === 'OVER_LIMIT') return 429;
  return response.overallCode === 'OK' ? 200 : 500;
}

// Each message's fields: JSON name → the .proto's name, which protojson also accepts.
const REQUEST = { domain: 'domain', descriptors: 'descriptors', hitsAddend: 'hits_addend' };
const DESCRIPTOR = {
  entries: 'entries',
  limit: 'limit',
  hitsAddend: 'hits_addend',
  isNegativeHits: 'is_negative_hits',
};
const ENTRY = { key: 'key', value: 'value' };
const OVERRIDE = { requestsPerUnit: 'requests_per_unit', unit: 'unit' };

/** envoy.type.v3.RateLimitUnit's names: no WEEK, which only its number 7 reaches. */
const OVERRIDE_UNIT_NAMES: Readonly<Record<string, number>> = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
};

const UINT32_MAX = 0xffff_ffff;
const UINT64_MAX = 2 ** 64;
const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
/** A JSON number, which is what protojson accepts inside a quoted integer. */
const JSON_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

function readDescriptor(json: unknown, i: number): RateLimitDescriptorMessage {
  const field = `descriptors[${i}]`;
  const fields = readMessage(json, field, DESCRIPTOR);
  return {
    entries: readList(fields.entries, `${field}.entries`).map((entry, j) => {
      const entryField = `${field}.entries[${j}]`;
      const { key, value } = readMessage(entry, entryField, ENTRY);
      return {
        key: readString(key, `${entryField}.key`),
        value: readString(value, `${entryField}.value`),
      };
    }),
    limit: fields.limit === undefined ? undefined : readOverride(fields.limit, `${field}.limit`),
    // A UInt64Value is its bare value in JSON; set, even to 0, it is not the default.
    hitsAddend:
      fields.hitsAddend === undefined
        ? undefined
        : readUnsigned(fields.hitsAddend, `${field}.hitsAddend`, UINT64_MAX),
    isNegativeHits: readBool(fields.isNegativeHits, `${field}.isNegativeHits`),
  };
}

function readOverride(json: unknown, field: string): { requestsPerUnit: number; unit: LimitUnit } {
  const { requestsPerUnit, unit } = readMessage(json, field, OVERRIDE);
  return {
    requestsPerUnit: readUnsigned(requestsPerUnit, `${field}.requestsPerUnit`, UINT32_MAX),
    unit: unitOfNumber(readUnitNumber(unit, `${field}.unit`)),
  };
}

/**
 * A message's fields under their JSON names. Null is left out, as protojson reads it as the
 * default; a field named twice, once in each spelling, is refused as protojson refuses it.
 */
function readMessage<Name extends string>(
  json: unknown,
  field: string,
  names: Readonly<Record<Name, string>>,
): Partial<Record<Name, unknown>> {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new RequestJsonError(field, `expected an object, got ${describe(json)}`);
  }
  const fields: Partial<Record<Name, unknown>> = {};
  const seen = new Set<string>();
  for (const [key, value] of Object.entries(json)) {
    const name = (Object.keys(names) as Name[]).find((n) => n === key || names[n] === key);
    const at = field === '' ? key : `${field}.${key}`;
    if (name === undefined) throw new RequestJsonError(at, 'unknown field');
    if (seen.has(name)) throw new RequestJsonError(at, `${name} given twice`);
    seen.add(name);
    if (value !== null) fields[name] = value;
  }
  return fields;
}

function readList(json: unknown, field: string): unknown[] {
  if (json === undefined) return [];
  if (!Array.isArray(json))
    throw new RequestJsonError(field, `expected an array, got ${describe(json)}`);
  return json;
}

function readString(json: unknown, field: string): string {
  if (json === undefined) return '';
  if (typeof json !== 'string')
    throw new RequestJsonError(field, `expected a string, got ${describe(json)}`);
  return json;
}

function readBool(json: unknown, field: string): boolean {
  if (json === undefined) return false;
  if (typeof json !== 'boolean')
    throw new RequestJsonError(field, `expected a boolean, got ${describe(json)}`);
  return json;
}

/** An unsigned integer, as a number or a quoted one ("5", "5e0"), up to `max`. */
function readUnsigned(json: unknown, field: string, max: number): number {
  if (json === undefined) return 0;
  const number = typeof json === 'string' && JSON_NUMBER.test(json) ? Number(json) : json;
  if (typeof number !== 'number' || !Number.isInteger(number) || number < 0 || number > max) {
    throw new RequestJsonError(field, `expected an unsigned integer, got ${describe(json)}`);
  }
  return number;
}

/** An enum by name, or by any int32 number: proto3 enums are open. */
function readUnitNumber(json: unknown, field: string): number {
  if (json === undefined) return 0;
  if (typeof json === 'string' && Object.hasOwn(OVERRIDE_UNIT_NAMES, json)) {
    return OVERRIDE_UNIT_NAMES[json] as number;
  }
  if (
    typeof json === 'number' &&
    Number.isInteger(json) &&
    json >= INT32_MIN &&
    json <= INT32_MAX
  ) {
    return json;
  }
  throw new RequestJsonError(field, `${describe(json)} is not an envoy.type.v3.RateLimitUnit`);
}

function describe(json: unknown): string {
  if (json === null) return 'null';
  if (Array.isArray(json)) return 'an array';
  return typeof json === 'string'
    ? JSON.stringify(json)
    : typeof json === 'object'
      ? 'an object'
      : String(json);
}

function statusJson(status: DescriptorStatusMessage, field: string): Record<string, unknown> {
  const limit = status.currentLimit;
  return present({
    code: codeJson(status.code, `${field}.code`),
    currentLimit:
      limit === undefined
        ? undefined
        : present({
            name: limit.name || undefined,
            requestsPerUnit:
              uint32(limit.requestsPerUnit, `${field}.currentLimit.requestsPerUnit`) || undefined,
            unit: unitNumber(limit.unit, `${field}.currentLimit.unit`)
              ? limit.unit.toUpperCase()
              : undefined,
          }),
    limitRemaining: uint32(status.limitRemaining, `${field}.limitRemaining`) || undefined,
    durationUntilReset:
      status.durationUntilResetMs === undefined
        ? undefined
        : durationJson(durationOf(status.durationUntilResetMs, `${field}.durationUntilResetMs`)),
    quota: status.quota === undefined ? undefined : quotaJson(status.quota, `${field}.quota`),
  });
}

function quotaJson(quota: QuotaMessage, field: string): Record<string, unknown> {
  return present({
    requests: uint32(quota.requests, `${field}.requests`) || undefined,
    validUntil:
      quota.validUntilMs === undefined
        ? undefined
        : timestampJson(timestampOf(quota.validUntilMs, `${field}.validUntilMs`)),
    id: quota.id || undefined,
  });
}

function headerJson({ key, value, rawValue }: HeaderValueMessage): Record<string, unknown> {
  return present({
    key: key || undefined,
    value: value || undefined,
    rawValue: bytesJson(rawValue),
  });
}

function codeJson(code: Code, field: string): Code | undefined {
  return codeNumber(code, field) === 0 ? undefined : code;
}

function bytesJson(bytes: Uint8Array | undefined): string | undefined {
  return bytes === undefined || bytes.length === 0
    ? undefined
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

function listJson<T>(
  list: readonly T[] | undefined,
  toJson: (item: T, i: number) => unknown,
): unknown[] | undefined {
  return list === undefined || list.length === 0 ? undefined : list.map(toJson);
}

/** A Struct's JSON, checked: protojson refuses NaN and the infinities, which JSON cannot hold. */
function structJson(value: unknown, field: string): JsonValue {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (Array.isArray(value)) return value.map((item, i) => structJson(item, `${field}[${i}]`));
  if (typeof value !== 'object') {
    throw new TypeError(`${field}: ${String(value)} is not a JSON value`);
  }
  const json: Record<string, JsonValue> = {};
  for (const [key, item] of Object.entries(value)) {
    // Left out, as JSON.stringify leaves out an undefined property.
    if (item !== undefined) json[key] = structJson(item, `${field}.${key}`);
  }
  return json;
}

/** The object without its undefined fields: protojson leaves out a field at its default. */
function present(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}
