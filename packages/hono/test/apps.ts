// Hono and its Node server, resolved from this package (the root does not depend on them), for this package's tests and the conformance driver.
export { createAdaptorServer } from '@hono/node-server';
export { Hono } from 'hono';
export type { Context } from 'hono';
