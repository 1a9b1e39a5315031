// @sentinel/fastify: placeholder until the adapter lands.
export {};
