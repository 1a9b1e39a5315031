// What Express 5 gives as req.ip for requests over a real socket, for the Hono and fetch suites to compare trustProxy with.
import type { TrustProxy } from '@sentinel/core';
import { express5, serve } from '../../express/test/apps.ts';

/** X-Forwarded-For values, honest and hostile, that the comparisons send. */
export const FORWARDED_FOR = [
  '203.0.113.7',
  '198.51.100.1, 203.0.113.7',
  '198.51.100.1, 203.0.113.7, 127.0.0.1',
  'garbage, , 127.0.0.1',
  ',',
  Array(400).fill('127.0.0.1').join(', '),
] as const;

/** The settings the comparisons use, each as Express's `trust proxy` and as `trustProxy`. */
export const TRUST_SETTINGS: readonly TrustProxy[] = [
  true,
  false,
  1,
  2,
  'loopback',
  ['10.0.0.0/8'],
];

/** GETs `url` once with each of FORWARDED_FOR, and returns what each response body says. */
export async function sendEach(url: string): Promise<unknown[]> {
  const answers: unknown[] = [];
  for (const forwardedFor of FORWARDED_FOR) {
    const response = await fetch(url, { headers: { 'x-forwarded-for': forwardedFor } });
    answers.push(await response.json());
  }
  return answers;
}

/** Express 5's req.ip for each of FORWARDED_FOR, sent on a real socket from 127.0.0.1. */
export async function expressIps(trust: TrustProxy): Promise<unknown[]> {
  const app = express5.app();
  app.set('trust proxy', trust);
  app.get('/', (req, res) => void res.json(req.ip));
  const served = await serve(app);
  try {
    return await sendEach(served.url);
  } finally {
    await served.close();
  }
}
