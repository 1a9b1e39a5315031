// Hono and its Node server, resolved from this package (the root does not depend on them), for this package's tests and the conformance driver.
export { createAdaptorServer, type HttpBindings } from '@hono/node-server';
export type { Context } from 'hono';
export { Hono } from 'hono';
