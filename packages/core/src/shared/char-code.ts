// A string's characters read in hot loops, whatever state String.prototype is in.

/**
 * `String.prototype.charCodeAt`, to be called as `charCodeAt.call(text, i)`. Read as
 * `text.charCodeAt`, the method is looked up on String.prototype, which ioredis 6 leaves with
 * dictionary properties (its VerbatimString extends String): optimized code then calls a generic
 * inline cache on every character, about 120 instructions each (callgrind), where a key's check
 * or hash takes a few. Read once here, the call compiles to a plain character read.
 */
export const charCodeAt: (this: string, index: number) => number = String.prototype.charCodeAt;
