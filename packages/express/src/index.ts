// @sentinel/express: placeholder until the adapter lands.
export {};
