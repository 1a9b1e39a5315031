// sentinel-rls's HTTP listener over real sockets: /healthcheck, /json, /metrics and hostile input.
import { request } from 'node:http';
import { type HttpServer, MAX_JSON_BODY_BYTES, startHttpServer } from '@sentinel/rls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const METRICS = '# HELP up Whether it is.\n# TYPE up counter\nup 1\n';

let healthy = true;
const decided: unknown[] = [];
let server: HttpServer;
let base: string;

beforeAll(async () => {
  server = await startHttpServer({
    host: '127.0.0.1',
    port: 0,
    health: () => healthy,
    decideJson: async (body) => {
      decided.push(body);
      const { domain } = body as { domain?: unknown };
      if (domain === 'throws') throw new Error('secret internals');
      if (typeof domain !== 'string') return { status: 400, body: { error: 'no domain' } };
      const over = domain === 'busy';
      return {
        status: over ? 429 : 200,
        body: { overallCode: over ? 'OVER_LIMIT' : 'OK', statuses: [{ code: 'OK' }] },
      };
    },
    metrics: () => METRICS,
  });
  base = `http://127.0.0.1:${server.port}`;
});

afterAll(() => server.close());

function postJson(body: string | Uint8Array): Promise<Response> {
  return fetch(`${base}/json`, { method: 'POST', body });
}

/** A request with a body sent in chunks, no Content-Length: only the running count can stop it. */
function postChunked(
  chunks: number,
  chunkBytes: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/json`, { method: 'POST' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    const chunk = Buffer.alloc(chunkBytes, 0x20);
    let sent = 0;
    const more = () => {
      while (sent < chunks) {
        sent++;
        if (!req.write(chunk)) {
          req.once('drain', more);
          return;
        }
      }
      req.end();
    };
    more();
  });
}

describe('startHttpServer', () => {
  it('listens on the port it picked for port 0', () => {
    expect(server.port).toBeGreaterThan(0);
  });

  it('answers /healthcheck 200 OK while healthy, and 500 when not', async () => {
    healthy = true;
    const ok = await fetch(`${base}/healthcheck`);
    expect([ok.status, await ok.text()]).toEqual([200, 'OK']);
    healthy = false;
    const failing = await fetch(`${base}/healthcheck`);
    expect(failing.status).toBe(500);
    await failing.text();
    healthy = true;
  });

  it('answers 500 to /healthcheck when the health check itself throws', async () => {
    const throwing = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      health: () => {
        throw new Error('no');
      },
      decideJson: async () => ({ status: 200, body: {} }),
      metrics: () => '',
    });
    try {
      const response = await fetch(`http://127.0.0.1:${throwing.port}/healthcheck`);
      expect(response.status).toBe(500);
      await response.text();
    } finally {
      await throwing.close();
    }
  });

  it('hands the parsed /json body to decideJson and answers 200 with its JSON', async () => {
    const body = { domain: 'api', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] };
    decided.length = 0;
    const response = await postJson(JSON.stringify(body));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ overallCode: 'OK', statuses: [{ code: 'OK' }] });
    expect(decided).toEqual([body]);
  });

  it('answers 429 over the limit, with the body', async () => {
    const response = await postJson('{"domain":"busy","descriptors":[]}');
    expect(response.status).toBe(429);
    expect(await response.json()).toMatchObject({ overallCode: 'OVER_LIMIT' });
  });

  it('answers the status decideJson gives to a body it cannot read', async () => {
    const response = await postJson('[1, 2]');
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({ error: 'no domain' });
  });

  it('ignores a query string', async () => {
    const response = await fetch(`${base}/json?x=1`, { method: 'POST', body: '{"domain":"a"}' });
    expect(response.status).toBe(200);
    await response.text();
  });

  it.each(['{', '', 'nope', '{"domain": "a",}', '\u00ff\u00fe'])(
    'answers 400 with one line to the body %j, which is not JSON',
    async (body) => {
      const response = await postJson(body);
      expect(response.status).toBe(400);
      const text = await response.text();
      expect(text).toBe('request body is not valid JSON\n');
    },
  );

  it('answers 400 to a string that is not UTF-8, where it would otherwise read U+FFFD', async () => {
    const bytes = Buffer.concat([
      Buffer.from('{"domain":"'),
      Buffer.from([0xff]),
      Buffer.from('"}'),
    ]);
    const response = await postJson(new Uint8Array(bytes));
    expect(response.status).toBe(400);
    expect(await response.text()).toBe('request body is not valid JSON\n');
  });

  it('decides nothing for a client that leaves mid-body, and keeps serving', async () => {
    decided.length = 0;
    await new Promise<void>((resolve) => {
      const req = request(`${base}/json`, { method: 'POST', headers: { 'Content-Length': 1000 } });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write('{"domain":"a"}', () => setTimeout(() => req.destroy(), 20));
    });
    const next = await fetch(`${base}/healthcheck`);
    expect(next.status).toBe(200);
    await next.text();
    expect(decided).toEqual([]);
  });

  it('answers 413 to a declared body over 1 MiB, and keeps serving', async () => {
    const response = await postJson('x'.repeat(MAX_JSON_BODY_BYTES + 1));
    expect(response.status).toBe(413);
    expect(await response.text()).toBe(
      `request body is larger than ${MAX_JSON_BODY_BYTES} bytes\n`,
    );
    const next = await fetch(`${base}/healthcheck`);
    expect(next.status).toBe(200);
    await next.text();
  });

  it('answers 413 to a chunked body once it passes 1 MiB', async () => {
    const { status, body } = await postChunked(40, 64 * 1024);
    expect(status).toBe(413);
    expect(body).toMatch(/^request body is larger than/);
  });

  it('accepts a body of exactly 1 MiB', async () => {
    const padded = `{"domain":"a"${' '.repeat(MAX_JSON_BODY_BYTES - 14)}}`;
    expect(Buffer.byteLength(padded)).toBe(MAX_JSON_BODY_BYTES);
    const response = await postJson(padded);
    expect(response.status).toBe(200);
    await response.text();
  });

  it('answers 500 without the message when decideJson throws', async () => {
    const response = await postJson('{"domain":"throws"}');
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).toBe('internal error\n');
  });

  it('serves /metrics as the Prometheus text format 0.0.4', async () => {
    const response = await fetch(`${base}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await response.text()).toBe(METRICS);
  });

  it.each(['/', '/json/', '/metrics.txt', '/__proto__', '/constructor', '/hasOwnProperty'])(
    'answers 404 to %s',
    async (path) => {
      const response = await fetch(`${base}${path}`);
      expect(response.status).toBe(404);
      await response.text();
    },
  );

  it.each([
    ['GET', '/json', 'POST'],
    ['PUT', '/json', 'POST'],
    ['POST', '/healthcheck', 'GET, HEAD'],
    ['DELETE', '/metrics', 'GET, HEAD'],
  ])('answers 405 to %s %s, and says what it takes', async (method, path, allow) => {
    const response = await fetch(`${base}${path}`, { method });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe(allow);
    await response.text();
  });

  it('answers HEAD on /healthcheck without a body', async () => {
    const response = await fetch(`${base}/healthcheck`, { method: 'HEAD' });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('');
  });

  it('refuses to start on a port in use', async () => {
    await expect(
      startHttpServer({
        host: '127.0.0.1',
        port: server.port,
        health: () => true,
        decideJson: async () => ({ status: 200, body: {} }),
        metrics: () => '',
      }),
    ).rejects.toThrow(/EADDRINUSE/);
  });

  it('stops listening once closed', async () => {
    const other = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      health: () => true,
      decideJson: async () => ({ status: 200, body: {} }),
      metrics: () => '',
    });
    const url = `http://127.0.0.1:${other.port}/healthcheck`;
    const response = await fetch(url);
    await response.text();
    await other.close();
    await expect(fetch(url)).rejects.toThrow();
  });
});
