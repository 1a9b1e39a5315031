// GETs through supertest to an app's server in process: supertest listens it while they are pending.
import type { Server } from 'node:http';
import request from 'supertest';

/** A response as the suites assert on it. */
export interface Reply {
  status: number;
  headers: Headers;
  /** The JSON body, or the text when it is not JSON. */
  body: unknown;
  text: string;
}

/**
 * Keeps the body as text whatever its type: the suites parse it themselves, and a problem+json
 * body they cannot parse is a body to assert on, not a failed request.
 */
function asText(res: request.Response, done: (error: Error | null, body: unknown) => void) {
  res.text = '';
  res.setEncoding('utf8');
  res.on('data', (chunk: string) => {
    res.text += chunk;
  });
  res.on('end', () => done(null, undefined));
}

/** Node's header fields as WHATWG Headers; a field sent twice is appended twice. */
function headersOf(fields: Record<string, string | string[] | undefined>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(fields)) {
    for (const one of [value ?? []].flat()) headers.append(name, one);
  }
  return headers;
}

/** GETs `path` of `server` with `headers`; every status resolves, as with fetch. */
export async function get(
  server: Server,
  path = '/',
  headers: Record<string, string> = {},
): Promise<Reply> {
  const response = await request(server)
    .get(path)
    .set(headers)
    .ok(() => true)
    .parse(asText);
  const text = response.text;
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  return { status: response.status, headers: headersOf(response.headers), body, text };
}

/** How a test talks to an app: through supertest, or on a real socket it asks for first. */
export interface AppClient {
  /** A GET through supertest, in process. */
  get(path?: string, headers?: Record<string, string>): Promise<Reply>;
  /**
   * Serves the app on a real socket, for what supertest cannot do: a client that leaves
   * mid-request, bytes it refuses to send. Resolves with its base URL. Only before the first
   * get(): a server supertest started is supertest's to close.
   */
  listen(): Promise<string>;
}

/** The client of a built app, whose server is not yet listening. */
export function clientOf(app: { server: Server; listen(): Promise<string> }): AppClient {
  let sent = false;
  return {
    get(path, headers) {
      sent = true;
      return get(app.server, path, headers);
    },
    async listen() {
      if (sent) throw new Error('listen() comes before the first get()');
      return app.listen();
    },
  };
}
