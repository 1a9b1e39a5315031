// Starts the API on Express: PORT from the environment (0 for any free port), limits in Redis when REDIS_URL is set.
import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppModule } from './app.module.js';

async function bootstrap() {
  const app = await NestFactory.create<NestExpressApplication>(AppModule);
  // req.ip, which byIp() counts by, is the client's address behind a proxy on this machine.
  app.set('trust proxy', 'loopback');
  // On SIGINT or SIGTERM Nest closes the app, and SentinelModule its limiters and Redis client.
  app.enableShutdownHooks();
  await app.listen(Number(process.env.PORT ?? 3000));
  const { port } = app.getHttpServer().address() as AddressInfo;
  const store = process.env.REDIS_URL ? 'Redis' : 'memory';
  console.log(`Listening on http://localhost:${port} (${store} store). Try:`);
  console.log(`  curl -i localhost:${port}/ -H 'x-api-key: pro-key'`);
  console.log(
    `  curl -i localhost:${port}/login -H 'content-type: application/json' -d '{"account":"alice","password":"correct horse battery staple"}'`,
  );
}

void bootstrap();
