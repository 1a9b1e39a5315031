// A login route behind Sentinel: only failed attempts count, 5 per 15 minutes for each account
// and client IP, and once the fifth has failed the pair is refused for 15 minutes.
import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { rateLimit } from '@sentinel/express';
import express from 'express';

// Stands in for your user store; compare password hashes there, never plain text.
const PASSWORDS: Record<string, string> = { alice: 'correct horse battery staple' };

// With REDIS_URL the attempts count across every instance; without it each process counts alone.
const redisUrl = process.env.REDIS_URL || undefined;

const loginLimit = rateLimit({
  redisUrl,
  policies: {
    name: 'login',
    limit: 5,
    window: '15m',
    algorithm: 'fixed-window',
    // The penalty box: once refused, refused for 15 minutes, however the window turns.
    blockFor: '15m',
  },
  // Per account and client IP: one address cannot lock an account for everyone, nor guess
  // across accounts at full speed. Keys that are long or odd are hashed before they are stored.
  identify: (req) => ({ key: `${String(req.body?.account ?? '').toLowerCase()}|${req.ip}` }),
  // Counted when the attempt arrives, so a burst cannot slip past; given back once the response
  // says it succeeded (status below 400).
  skipSuccessfulRequests: true,
  group: 'login',
});

function passwordMatches(account: unknown, password: unknown): boolean {
  const expected = typeof account === 'string' ? PASSWORDS[account] : undefined;
  if (expected === undefined || typeof password !== 'string') return false;
  const given = Buffer.from(password);
  const wanted = Buffer.from(expected);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

const app = express();
app.set('trust proxy', 'loopback');
app.use(express.json());
app.post('/login', loginLimit, (req, res) => {
  if (passwordMatches(req.body?.account, req.body?.password)) {
    res.json({ ok: true });
  } else {
    res.status(401).json({ ok: false, attemptsLeft: req.rateLimit?.remaining });
  }
});

const server = app.listen(Number(process.env.PORT ?? 3001), () => {
  // PORT=0 picks a free port: print the one the server got.
  const { port } = server.address() as AddressInfo;
  const login = `curl -i localhost:${port}/login -H 'content-type: application/json'`;
  console.log(
    `Listening on http://localhost:${port} (${redisUrl ? 'Redis' : 'memory'} store). Try:`,
  );
  console.log(`  ${login} -d '{"account":"alice","password":"guess"}'`);
  console.log(`  ${login} -d '{"account":"alice","password":"correct horse battery staple"}'`);
});

process.once('SIGINT', () => {
  server.close();
  void loginLimit.close();
});
