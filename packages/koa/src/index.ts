// @sentinel/koa: placeholder until the adapter lands.
export {};
