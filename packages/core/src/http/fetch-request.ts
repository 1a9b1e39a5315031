// A fetch API Request as identifiers read requests: its headers as a record, and the client address beside it.
import type { RequestLike } from './identity.ts';

/** Header names as identifiers read them (lower case), each to its value. */
export type HeaderRecord = Readonly<Record<string, string | undefined>>;

/** What identifiers and the other options' functions get for a fetch API request. */
export interface FetchRequestLike extends RequestLike {
  /** The request itself. */
  readonly request: Request;
  /** Its headers, read through to `request.headers`: `headers['x-api-key']`. */
  readonly headers: HeaderRecord;
  /** The client address, from the runtime's connection (and `trustProxy`); undefined if none was found. */
  readonly ip: string | undefined;
}

const handler: ProxyHandler<Headers> = {
  get: (headers, name) => (typeof name === 'string' ? (headers.get(name) ?? undefined) : undefined),
  has: (headers, name) => typeof name === 'string' && headers.has(name),
  ownKeys: (headers) => [...headers.keys()],
  getOwnPropertyDescriptor: (headers, name) => {
    if (typeof name !== 'string' || !headers.has(name)) return undefined;
    const value = headers.get(name) ?? undefined;
    return { value, enumerable: true, configurable: true, writable: false };
  },
  set: () => false,
  deleteProperty: () => false,
  defineProperty: () => false,
};

/**
 * `headers` as a read-only record whose fields are read when asked for: most requests are
 * identified by one or two headers, and copying all of them would cost more than the check.
 */
export function headerRecord(headers: Headers): HeaderRecord {
  return new Proxy(headers, handler) as unknown as HeaderRecord;
}
