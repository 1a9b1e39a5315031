// Nest, resolved from this package (the root does not depend on it), for the conformance drivers and the suites in test/.
import 'reflect-metadata';

export {
  type ArgumentsHost,
  Catch,
  Controller,
  Get,
  HttpStatus,
  type INestApplication,
  Module,
  Req,
  Res,
} from '@nestjs/common';
export { APP_GUARD, BaseExceptionFilter, NestFactory } from '@nestjs/core';
export { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
export { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
