// Import rules for packages/*/src, checked by `pnpm lint` (dependency-cruiser).
//
// Data flows one way: adapter → core limiter → store → (Lua in Redis | memory). Inside
// packages/core/src each folder is a layer and may import only the layers below it:
//
//   index.ts adapter.ts internal.ts prometheus.ts   entry points; nothing inside src imports them
//   http/        the framework-free HTTP layer      → limiter, observe, shared; never a store
//   limiter/     createLimiter, policies, breaker   → stores, observe, algorithms, shared
//   observe/     observer, prometheus, reporter     → shared
//   stores/      store-keys.ts and one folder per store; a store imports no other store
//     memory/                                      → stores/store-keys.ts, algorithms, shared
//     redis/     the only code that holds a Redis client
//   algorithms/  the TypeScript twins of lua/*.lua  → shared, node builtins
//   shared/      types, errors, validation, ...    → nothing else of core
//
// The adapters (every package but core) import @sentinel/core and its subpaths only; core never
// imports an adapter and adapters never import each other.
//
// Type-only imports count (tsPreCompilationDeps): a type that crosses a layer is as much a
// dependency as a value is, and it is what a published .d.ts will import.
//
// Paths are relative to where depcruise runs: the repository root for `pnpm lint`, a fixture tree
// that mirrors it for test/import-rules.test.ts, which breaks each rule once.
const path = require('node:path');

const CORE = '^packages/core/src/';
const ADAPTER_SRC = '^packages/(?!core/)([^/]+)/src/';
// The files package.json "exports" names (core has four, an adapter only index.ts), and the one
// its "bin" runs (sentinel-rls's bin.ts).
const ENTRY_POINTS = '^packages/([^/]+)/src/(index|adapter|internal|prometheus|bin)[.]ts$';
// The Redis clients Sentinel supports, their npm aliases (ioredis5, redis5) and the node-redis
// and Valkey scoped packages; unresolved (bare name) or resolved (inside node_modules).
const REDIS_CLIENTS =
  '(^|node_modules/)(ioredis[0-9]*|iovalkey|redis[0-9]*|@redis/[^/]+|@valkey/[^/]+)(/|$)';

/** A rule that `from` may import nothing of core outside the folders in `allowed`. */
function onlyCore(name, comment, from, allowed) {
  return {
    name,
    comment,
    severity: 'error',
    from: { path: `${CORE}${from}/` },
    to: { path: CORE, pathNot: `${CORE}(${allowed.join('|')})/` },
  };
}

module.exports = {
  forbidden: [
    {
      name: 'adapters-not-to-each-other',
      comment:
        'An adapter is a thin layer over @sentinel/core for one framework. Importing another ' +
        "adapter would tie the two frameworks' releases together and pull a second framework " +
        'into the app. Move what both need into core (http/ is the framework-free layer).',
      severity: 'error',
      from: { path: ADAPTER_SRC },
      to: { path: '^packages/(?!core/)[^/]+/', pathNot: '^packages/$1/' },
    },
    {
      name: 'core-not-to-adapters',
      comment:
        'Core is framework-free: every adapter depends on it, so an import the other way would be ' +
        'a cycle between packages and would make core carry a web framework.',
      severity: 'error',
      from: { path: '^packages/core/' },
      to: { path: '^packages/(?!core/)[^/]+/' },
    },
    {
      name: 'redis-client-only-in-redis-store',
      comment:
        'Only stores/redis/ talks to a Redis client (ioredis, iovalkey, node-redis): the limiter ' +
        'and the HTTP layer see a Store, so the memory store and every test double stay ' +
        'interchangeable, and the client stays an optional peer dependency.',
      severity: 'error',
      from: { path: '^packages/', pathNot: `${CORE}stores/redis/` },
      to: { path: REDIS_CLIENTS },
    },
    {
      name: 'module-loader-only-in-redis-store',
      comment:
        "stores/redis/client.ts loads ioredis with createRequire(import.meta.url)('ioredis'), " +
        'so that ioredis stays optional, and observe/opentelemetry.ts loads @opentelemetry/api ' +
        'so; no static check can see which package such a call loads. Keeping node:module ' +
        '(createRequire) inside those two keeps any hidden load there too.',
      severity: 'error',
      from: {
        path: '^packages/',
        pathNot: `${CORE}(stores/redis/|observe/opentelemetry\\.ts$)`,
      },
      to: { dependencyTypes: ['core'], path: '^module$' },
    },
    {
      name: 'http-not-to-stores',
      comment:
        'The HTTP layer reaches a store only through a limiter (limiter/), which owns the ' +
        'failure mode, breaker and block cache; an adapter option that picks a store is resolved ' +
        'there, not in http/.',
      severity: 'error',
      from: { path: `${CORE}http/` },
      to: { path: `${CORE}stores/` },
    },
    {
      name: 'limiter-not-to-http',
      comment:
        'The limiter is usable without HTTP (createLimiter in a worker or a CLI); http/ builds on ' +
        'it, not the other way round.',
      severity: 'error',
      from: { path: `${CORE}limiter/` },
      to: { path: `${CORE}http/` },
    },
    {
      name: 'stores-not-to-upper-layers',
      comment:
        'A store answers the request in stores/store-keys.ts and knows nothing of the limiter, ' +
        'the HTTP layer or observers: the limiter observes what a store returns. An import ' +
        'upward would be a cycle between layers.',
      severity: 'error',
      from: { path: `${CORE}stores/` },
      to: { path: `${CORE}(limiter|http|observe)/` },
    },
    {
      name: 'stores-not-to-each-other',
      comment:
        'Each store stands alone behind the Store interface (shared/types.ts); what two stores ' +
        'share belongs in stores/store-keys.ts, algorithms/ or shared/.',
      severity: 'error',
      from: { path: `${CORE}stores/([^/]+)/` },
      to: { path: `${CORE}stores/[^/]+/`, pathNot: `${CORE}stores/$1/` },
    },
    onlyCore(
      'observe-only-to-shared',
      'Observers (events, Prometheus, the reporter) describe decisions; they import the types in ' +
        'shared/ and nothing that makes decisions, so every layer above may report to them.',
      'observe',
      ['observe', 'shared'],
    ),
    {
      name: 'algorithms-only-to-shared',
      comment:
        'algorithms/ are the pure TypeScript twins of lua/*.lua, run by the memory store and ' +
        'compared with Redis by the parity tests: they import shared/ and node builtins only, ' +
        'never a store, the limiter or an npm package.',
      severity: 'error',
      from: { path: `${CORE}algorithms/` },
      to: { pathNot: `${CORE}(algorithms|shared)/`, dependencyTypesNot: ['core'] },
    },
    onlyCore(
      'shared-not-to-core',
      'shared/ is the bottom layer (types, errors, validation, windows, the generated Lua ' +
        'constants) that every other folder imports; an import from it into core would be a cycle.',
      'shared',
      ['shared'],
    ),
    {
      name: 'layers-not-to-entry-points',
      comment:
        'The entry points (index.ts, adapter.ts, internal.ts, prometheus.ts) sit on top of every ' +
        'layer and only re-export; a folder importing one would import the whole package.',
      severity: 'error',
      from: { path: `${CORE}[^/]+/` },
      to: { path: `${CORE}[^/]+[.]ts$` },
    },
    {
      name: 'no-circular',
      comment:
        'In a cycle neither module can be read, tested or moved without the other, and with a ' +
        'run-time import ES modules may meet a binding before it is initialised: one of them ' +
        'holds something that belongs in a module both can import. Type-only cycles count too: ' +
        'they tie the modules together just the same, in the source and in the published .d.ts.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-dev-dep',
      comment:
        'A package only in devDependencies is not installed for users, so an import of it from ' +
        'src breaks at run time (or, type-only, in the published .d.ts). A peer dependency kept ' +
        'in devDependencies to test against (express, prom-client) is fine.',
      severity: 'error',
      from: { path: '^packages/[^/]+/src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['npm-peer'] },
    },
    {
      name: 'no-non-package-json',
      comment:
        "An npm package that is not in the importing package's package.json resolves only by " +
        'accident (hoisting in this workspace) and not for users; add it to dependencies or ' +
        'peerDependencies. (An optional peer is also listed in peerDependenciesMeta, which ' +
        'dependency-cruiser reports as npm-no-pkg beside npm-peer; that is not a miss.)',
      severity: 'error',
      from: {},
      to: {
        dependencyTypes: ['npm-no-pkg', 'npm-unknown'],
        dependencyTypesNot: ['npm', 'npm-peer', 'npm-optional', 'npm-dev'],
      },
    },
    {
      name: 'not-to-unresolvable',
      comment:
        'An import that resolves to no file: a typo, a missing .ts extension, a package that is ' +
        'not installed, or a subpath that package.json "exports" does not offer.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'no-unreachable-modules',
      comment:
        'A module under src that no entry point of its package (package.json "exports") reaches ' +
        'is dead code that still ships: delete it or import it. Stricter than no-orphans, which ' +
        'misses a dead module that itself imports something.',
      severity: 'error',
      from: { path: ENTRY_POINTS },
      to: { path: '^packages/$1/src/', pathNot: ENTRY_POINTS, reachable: false },
    },
  ],
  options: {
    // Only the packages' sources: builds (dist, .tsbuild), tests, configs and scripts import
    // freely. (Not a bare `dist/`: that would drop every npm package that ships one, and with it
    // the imports of it that the rules check.)
    exclude: { path: '^packages/[^/]+/(?!src(/|$))' },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    // Resolution needs the extensions (imports name the .ts file) and the "exports" of each
    // package.json (@sentinel/core/adapter → src/adapter.ts). The tsconfig adds nothing today,
    // as none sets `paths`; it is here so that one would be honoured. An absolute path, because
    // the test runs depcruise from the fixture.
    tsConfig: { fileName: path.join(__dirname, 'tsconfig.base.json') },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'types', 'node', 'default'],
      mainFields: ['module', 'main', 'types'],
      extensions: ['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs', '.d.ts'],
    },
  },
};
