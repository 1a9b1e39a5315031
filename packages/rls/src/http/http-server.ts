// The HTTP listener: upstream's /healthcheck and /json, and /metrics; node:http and nothing else.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A /json body larger than this is refused with 413: a RateLimitRequest is a few hundred bytes. */
export const MAX_JSON_BODY_BYTES = 1024 * 1024;

export interface HttpServerOptions {
  readonly host: string;
  /** 0 picks a free port; the started server reports which. */
  readonly port: number;
  /** Whether /healthcheck answers 200 OK (else 500, as upstream's does). */
  readonly health: () => boolean;
  /**
   * Decides the parsed body of a POST /json, and answers the status (200 OK, 429 over the
   * limit) and the RateLimitResponse as proto3 JSON. A body it cannot read as a request should
   * be answered with a 400 here: a throw answers 500.
   */
  readonly decideJson: (body: unknown) => Promise<{ status: number; body: unknown }>;
  /** The Prometheus text for /metrics. */
  readonly metrics: () => string;
}

export interface HttpServer {
  /** The port listened on: the one asked for, or the one picked for port 0. */
  readonly port: number;
  /** Stops listening, and resolves once the requests in flight are answered. */
  close(): Promise<void>;
}

const TEXT = 'text/plain; charset=utf-8';
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/** Each path, and the methods it answers (HEAD with GET, as HTTP means it). */
const ROUTES: ReadonlyMap<string, readonly string[]> = new Map([
  ['/healthcheck', ['GET', 'HEAD']],
  ['/json', ['POST']],
  ['/metrics', ['GET', 'HEAD']],
]);

/** The request's path: a query string changes nothing, as with upstream's router. */
function pathOf(req: IncomingMessage): string {
  try {
    return new URL(req.url ?? '/', 'http://rls').pathname;
  } catch {
    return '';
  }
}

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

/** A one-line plain-text answer: the errors never echo what the client sent. */
function sendText(res: ServerResponse, status: number, message: string): void {
  send(res, status, TEXT, `${message}\n`);
}

class BodyTooLarge extends Error {}

/** Strict UTF-8, as upstream's protojson reads: a malformed byte is a bad request, not U+FFFD. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The body, or BodyTooLarge past `limit` bytes: a declared length is refused before any of it is
 * read, a chunked one as soon as it passes. What follows is read and dropped, not kept, so the
 * client can read its 413 instead of a reset.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (Number(req.headers['content-length'] ?? 0) > limit) {
      req.resume();
      reject(new BodyTooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        chunks.length = 0;
        req.off('data', onData);
        req.resume();
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
    // A client gone mid-body: after 'end' this changes nothing, the promise being settled.
    req.on('close', () => reject(new Error('the client closed the request')));
  });
}

/** Answers the requests of one server; a class so each endpoint reads in one view. */
class HttpEndpoints {
  constructor(private readonly options: HttpServerOptions) {}

  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = pathOf(req);
    const methods = ROUTES.get(path);
    if (methods === undefined) {
      sendText(res, 404, 'not found');
      return;
    }
    if (!methods.includes(req.method ?? '')) {
      res.setHeader('Allow', methods.join(', '));
      sendText(res, 405, `method not allowed: ${path} takes ${methods.join(', ')}`);
      return;
    }
    if (path === '/healthcheck') this.healthcheck(res);
    else if (path === '/metrics') send(res, 200, PROMETHEUS_TEXT, this.options.metrics());
    else await this.json(req, res);
  }

  healthcheck(res: ServerResponse): void {
    let healthy = false;
    try {
      healthy = this.options.health();
    } catch {}
    if (healthy) send(res, 200, TEXT, 'OK');
    else sendText(res, 500, 'unhealthy');
  }

  async json(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readBody(req, MAX_JSON_BODY_BYTES);
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        sendText(res, 413, `request body is larger than ${MAX_JSON_BODY_BYTES} bytes`);
      }
      // Otherwise the client went away mid-body: there is no one to answer.
      return;
    }
    let body: unknown;
    try {
      body = JSON.parse(UTF8.decode(raw));
    } catch {
      sendText(res, 400, 'request body is not valid JSON');
      return;
    }
    const answer = await this.options.decideJson(body);
    send(res, answer.status, 'application/json', JSON.stringify(answer.body));
  }
}

/**
 * Starts the HTTP listener of sentinel-rls: `GET /healthcheck`, `POST /json` (upstream's JSON
 * form of ShouldRateLimit) and `GET /metrics`. Unknown paths answer 404, a known path's other
 * methods 405; a body over 1 MiB 413, one that is not JSON 400.
 * @example const http = await startHttpServer({ host: '0.0.0.0', port: 8080, health, decideJson, metrics });
 */
export function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  const endpoints = new HttpEndpoints(options);
  const server = createServer(function rlsHttp(req, res) {
    endpoints.handle(req, res).catch(() => {
      // decideJson or metrics failed: their fault, not the client's, and the message stays here.
      if (!res.headersSent) sendText(res, 500, 'internal error');
      else res.destroy();
    });
  });
  // A /json request is small: a client that takes long to send one is holding a socket open.
  server.requestTimeout = 10_000;
  server.headersTimeout = 10_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () =>
          new Promise<void>((done, fail) => {
            server.close((error) => (error ? fail(error) : done()));
            server.closeIdleConnections();
          }),
      });
    });
  });
}
