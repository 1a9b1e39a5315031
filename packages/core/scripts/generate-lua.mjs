// Compiles lua/*.lua and lua/prelude/*.lua into src/stores/redis/scripts.generated.ts, so nothing
// reads .lua files at runtime, and the constants the TypeScript twins share with the scripts into
// src/shared/lua-constants.generated.ts. With --check it only verifies that both committed modules
// are current, and fails if either is stale.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const lua = (name) => readFileSync(join(root, 'lua', `${name}.lua`), 'utf8');
const targets = {
  scripts: join(root, 'packages/core/src/stores/redis/scripts.generated.ts'),
  constants: join(root, 'packages/core/src/shared/lua-constants.generated.ts'),
};

// The one list of algorithms: the constants module exports it as ALGORITHMS, which
// src/shared/types.ts re-exports and derives the Algorithm type from. The first is the default.
const algorithms = [
  'token-bucket',
  'gcra',
  'fixed-window',
  'sliding-window-counter',
  'sliding-window-log',
];
// Policies that limit what is in flight rather than a rate: held in the scripts like the
// algorithms above, but not among the rate algorithms a policy's `algorithm` may name.
const holders = ['concurrency'];
const kinds = [...algorithms, ...holders];
const luaFiles = (folder) =>
  readdirSync(join(root, folder))
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length));
// Scripts that decide no policy: each its own entry, on the prelude alone (see `entries`).
const standalone = ['throttler'];
// Every lua/*.lua file but the entry points (evaluate, batch and the standalone scripts) is an
// algorithm, listed above, that registers under its own name.
const files = luaFiles('lua').filter(
  (name) => !['evaluate', 'batch', ...standalone].includes(name),
);
for (const name of files) {
  if (!kinds.includes(name)) throw new Error(`lua/${name}.lua is not in the algorithm list`);
}
for (const name of kinds) {
  if (!lua(name).includes(`ALGORITHMS['${name}'] = function`)) {
    throw new Error(`lua/${name}.lua must register ALGORITHMS['${name}']`);
  }
}

// The prelude: what every script holds before its algorithms, one concept to a file of
// lua/prelude/, joined in this order. Lua sees a local only below its definition, so each part
// may use only what the parts above it define; the check below holds the list to that.
const parts = [
  // math_max, string_format and the other standard functions the scripts call most, as locals
  'standard',
  // ARGS_PER_POLICY, FIELDS_PER_POLICY, OUTCOMES and `answer`: how a call's policies come in and
  // their outcomes go out
  'reply',
  // ALGORITHMS, ADJUSTMENTS and WRITES_ITSELF: the tables the algorithm files register into
  'registry',
  // STATES, GIVEN_NOW, HELD, EXPIRY_MARGIN_MS, and read_state, write_state, save_state and
  // drop_state, through which every state and box key is read and written
  'state',
  // EPOCH_MS, and `begin`, which clears the state above and reads Redis's TIME
  'clock',
  // `decide`: a request against all its policies, all-or-nothing, with boxes, penalties, refunds
  'decision',
  // gcd, scale, ms_after and mul_div, the exact arithmetic of the rate algorithms
  'fixed-point',
  // quota leases in the state of a bucket that refills (token bucket, GCRA): their cap and ends
  'quota',
];
for (const part of parts) {
  if (!existsSync(join(root, 'lua/prelude', `${part}.lua`))) {
    throw new Error(`lua/prelude/${part}.lua is missing`);
  }
}
for (const name of luaFiles('lua/prelude')) {
  if (!parts.includes(name)) throw new Error(`lua/prelude/${name}.lua is not a part listed here`);
}
const partCode = parts.map((part) => lua(`prelude/${part}`));
// A local used by a part above the one that defines it would be read there as an unset global,
// which Redis refuses only when that line runs: so the order is checked here.
const uncommented = partCode.map((text) => text.replaceAll(/--.*$/gm, ''));
partCode.forEach((text, i) => {
  for (const [, list] of text.matchAll(/^local (?:function )?([\w, ]+)/gm)) {
    for (const name of list.split(',').map((word) => word.trim())) {
      const use = new RegExp(`\\b${name}\\b`);
      const user = uncommented.slice(0, i).findIndex((above) => use.test(above));
      if (user >= 0) {
        throw new Error(
          `lua/prelude/${parts[user]}.lua uses ${name}, which lua/prelude/${parts[i]}.lua defines below it`,
        );
      }
    }
  }
});
const prelude = partCode.join('\n');
const evaluate = lua('evaluate');
// Constants the TypeScript side shares with the scripts: the epoch, and the layout of a policy's
// arguments, which it builds. Each is read from whichever part defines it.
const constant = (name) => {
  const value = new RegExp(`^local ${name} = (\\d+)$`, 'm').exec(prelude)?.[1];
  if (!value) throw new Error(`no part of lua/prelude/ defines ${name}`);
  return value;
};
const epoch = constant('EPOCH_MS');
const argsPerPolicy = constant('ARGS_PER_POLICY');

// One script per algorithm keeps each as small as it can be; `mixed` serves tiers whose
// policies use different algorithms. A batch of requests whose policies all use one algorithm
// runs `batch-<algorithm>`, and any other batch `batch`: a script defines every algorithm it
// holds on each call, which costs Redis more than deciding a small batch's requests.
const compose = (names, main = evaluate) => [prelude, ...names.map(lua), main].join('\n');
const batch = lua('batch');
const entries = [
  ...kinds.map((name) => [name, compose([name])]),
  ['mixed', compose(kinds)],
  ['batch', compose(kinds, batch)],
  ...kinds.map((name) => [`batch-${name}`, compose([name], batch)]),
  ...standalone.map((name) => [name, compose([], lua(name))]),
];

// Redis 7 and later also hold all of it as one function library, loaded once per server: FCALL
// then runs an entry without defining the prelude and the algorithms again, which costs Redis a
// fifth of a one-policy call. The entries read KEYS and ARGV, which FCALL passes as arguments
// rather than globals, so the library keeps them where the entries find them. The library and
// its functions are named after a digest of its code, since every library's functions share one
// namespace: instances of different versions sharing a Redis each call their own.
const libraryCode = [
  'local KEYS, ARGV',
  prelude,
  ...kinds.map(lua),
  ...[['evaluate', evaluate], ['batch', batch], ...standalone.map((name) => [name, lua(name)])].map(
    ([entry, body]) =>
      `redis.register_function('FUNCTION_${entry}', function(keys, args)\nKEYS, ARGV = keys, args\n${body}end)\n`,
  ),
].join('\n');
const libraryName = `sentinel_${createHash('sha1').update(libraryCode).digest('hex').slice(0, 16)}`;
const library = `#!lua name=${libraryName}\n${libraryCode.replaceAll('FUNCTION_', `${libraryName}_`)}`;
const functionOf = (name) =>
  `${libraryName}_${standalone.includes(name) ? name : name.startsWith('batch') ? 'batch' : 'evaluate'}`;

const HEADER =
  '// Generated from lua/*.lua by packages/core/scripts/generate-lua.mjs. Do not edit.\n\n';

let constants = HEADER;
constants += "/** The scripts' epoch: their times are milliseconds since this Unix time. */\n";
constants += `export const EPOCH_MS = ${epoch};\n\n`;
constants +=
  "/** A policy's arguments to the scripts: algorithm, limit, window and penalty box. */\n";
constants += `export const ARGS_PER_POLICY = ${argsPerPolicy};\n\n`;
constants +=
  '/** The algorithms Sentinel runs, each atomically in one Redis script call and in memory. */\n';
constants += `export const ALGORITHMS = [\n${algorithms.map((name) => `  '${name}',\n`).join('')}] as const;\n\n`;
constants +=
  '/** Everything the scripts hold a policy with: the rate algorithms, then concurrency. */\n';
constants += `export const POLICY_KINDS = [...ALGORITHMS, ${holders.map((name) => `'${name}'`).join(', ')}] as const;\n`;

let out = HEADER;
out +=
  'export interface LuaScript {\n  readonly source: string;\n  readonly sha1: string;\n' +
  '  /** The function of `library` that runs the same code. */\n  readonly function: string;\n}\n\n';
out += '/** Every script as one Redis function library (Redis 7 and later), for FCALL. */\n';
out += `export const library = {\n  name: '${libraryName}',\n  source: ${JSON.stringify(library)},\n};\n\n`;
out += `export type ScriptName = ${entries.map(([name]) => `'${name}'`).join(' | ')};\n\n`;
out += 'export const scripts: Readonly<Record<ScriptName, LuaScript>> = {\n';
for (const [name, source] of entries) {
  const sha1 = createHash('sha1').update(source).digest('hex');
  out += `  '${name}': {\n    sha1: '${sha1}',\n    function: '${functionOf(name)}',\n    source: ${JSON.stringify(source)},\n  },\n`;
}
out += '};\n';

const generated = [
  [targets.scripts, out],
  [targets.constants, constants],
];
const shown = (path) => path.slice(join(root, 'packages/core/').length);
// The modules whose committed text differs from what the scripts compile to.
const stale = generated.filter(([path, code]) => {
  try {
    return readFileSync(path, 'utf8') !== code;
  } catch {
    return true;
  }
});
if (process.argv.includes('--check')) {
  for (const [path] of stale) {
    console.error(`${shown(path)} is stale: run \`pnpm lua:generate\` and commit the result.`);
  }
  if (stale.length > 0) process.exit(1);
  console.log(`${generated.map(([path]) => shown(path)).join(' and ')} match lua/*.lua`);
} else {
  // Every build runs this, and so does each pack of @sentinel/core (prepack), while tests may be
  // importing these modules: a file truncated and then written can be read half-written, and
  // its exports come out undefined. So only a stale module is written, and it is swapped in whole
  // by a rename.
  for (const [path, code] of stale) {
    const temporary = `${path}.${process.pid}.tmp`;
    writeFileSync(temporary, code);
    renameSync(temporary, path);
  }
}
