// Lends Fastify to the conformance driver in test/adapters, whose folder cannot resolve 'fastify'.
export { default as Fastify, type FastifyReply, type FastifyRequest } from 'fastify';
