// Koa 2 ships no types; its API is the one @types/koa describes, so the tests type it as such.
declare module 'koa2' {
  import Koa = require('koa');
  export = Koa;
}
