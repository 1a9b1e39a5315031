// The gateway's configuration: defaults, then a JSON or YAML file, then the environment, checked once.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createLimiter, fingerprint, MemoryStore, type TierOptions } from '@sentinel/core';
import type { SentinelOptions } from '@sentinel/fastify';
import { parse as parseYaml } from 'yaml';
import { otlpConfigured } from './telemetry.ts';

/** Whom an API key belongs to: keys of one tenant share its budget. */
export interface KeyOwner {
  tenant: string;
  tier: string;
  /** The tenant's own limits, in place of its tier's: a contract, say. */
  policies?: TierOptions;
}

/** A path prefix of the upstream with its own cost or budget. */
export interface RouteRule {
  path: string;
  cost?: number;
  group?: string;
}

/** The options handed to Sentinel as written: Sentinel checks them and names the option. */
export type LimiterSettings = Pick<
  SentinelOptions,
  | 'tiers'
  | 'defaultTier'
  | 'headers'
  | 'onStoreError'
  | 'timeout'
  | 'prefix'
  | 'shed'
  | 'quotaLeases'
  | 'openTelemetry'
>;

export interface GatewayConfig {
  /** The file the configuration came from, to prefix Sentinel's errors with; undefined without one. */
  file: string | undefined;
  host: string;
  port: number;
  /** Where admitted requests go; undefined starts the built-in echo upstream. */
  upstream: string | undefined;
  /** One URL for a Redis server, several for a Cluster; undefined keeps the limits in memory. */
  redisUrl: string | string[] | undefined;
  /** Issued API keys and whom they belong to. Raw keys stay in this map only. */
  keys: ReadonlyMap<string, KeyOwner>;
  /**
   * The keys file, read again when it changes, so that a key's tier or limits change without a
   * restart; undefined without one.
   */
  keysFile:
    | {
        path: string;
        tierNames: readonly string[] | undefined;
        /** The configuration file's own `keys`, which win over the keys file's. */
        inline: ReadonlyMap<string, KeyOwner>;
      }
    | undefined;
  /** How long a key's lookup is trusted before it is read again, in ms. */
  keyCacheTtlMs: number;
  /** True when `keys` are the built-in demo keys, to print at start-up. */
  demoKeys: boolean;
  routes: RouteRule[];
  logLevel: string;
  limiter: LimiterSettings;
  /** The admin routes' token; undefined keeps them off. */
  adminToken: string | undefined;
  /** Whether `/_sentinel` serves the status page. */
  statusPage: boolean;
}

/** A configuration mistake: the message names the field and is all the user needs to see. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** FREE at 10 a minute, PRO at 100 a minute with bursts of 20 a second, ENTERPRISE at 1000 a minute. */
const DEFAULT_TIERS = {
  FREE: { name: 'free-minute', limit: 10, window: '1m' },
  PRO: [
    { name: 'pro-minute', limit: 100, window: '1m' },
    { name: 'pro-burst', limit: 20, window: '1s', algorithm: 'gcra' },
  ],
  ENTERPRISE: { name: 'enterprise-minute', limit: 1000, window: '1m' },
} as const;

/** Known to anyone who reads the README, so used only with the built-in echo upstream. */
export const DEMO_KEYS: Record<string, KeyOwner> = {
  'demo-free-key': { tenant: 'demo-free', tier: 'FREE' },
  'demo-pro-key': { tenant: 'demo-pro', tier: 'PRO' },
  'demo-enterprise-key': { tenant: 'demo-enterprise', tier: 'ENTERPRISE' },
};

const FIELDS = [
  'host',
  'port',
  'upstream',
  'tiers',
  'defaultTier',
  'keys',
  'keysFile',
  'keyCacheTtlMs',
  'routes',
  'headers',
  'onStoreError',
  'timeout',
  'prefix',
  'shed',
  'quotaLeases',
  'openTelemetry',
  'logLevel',
  'admin',
  'statusPage',
] as const;
type FileConfig = Partial<Record<(typeof FIELDS)[number], unknown>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** An admin token shorter than this is a password someone could guess. */
const MIN_TOKEN_LENGTH = 16;

/** Whether a listening host is reachable from this machine only. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** Reads `--config <path>` or SENTINEL_CONFIG, then overrides the file with the environment. */
export function loadConfig(
  argv: readonly string[] = process.argv.slice(2),
  env: NodeJS.ProcessEnv = process.env,
): GatewayConfig {
  const values = commandLine(argv);
  // An empty variable counts as unset, as it does in most shells' `${VAR:-default}`.
  const fromEnv = (name: string) => env[name] || undefined;
  // `pnpm start` runs in this package's folder; pnpm's INIT_CWD is where it was started from,
  // the repository's root.
  const given = values.config ?? fromEnv('SENTINEL_CONFIG');
  const file = given && resolve(fromEnv('INIT_CWD') ?? '', given);
  const raw = file === undefined ? {} : readConfigFile(file);
  const at = (field: string) => `${file}: ${field}`;
  /** Names the variable when the environment set the value, else the file's field. */
  const origin = (variable: string, field: string) => (fromEnv(variable) ? variable : at(field));
  for (const field of Object.keys(raw)) {
    if (!(FIELDS as readonly string[]).includes(field)) {
      fail(at(field), `is not a field; the fields are ${FIELDS.join(', ')}`);
    }
  }

  const tiers = raw.tiers ?? DEFAULT_TIERS;
  const tierNames = isRecord(tiers) ? Object.keys(tiers) : undefined;
  const upstream = fromEnv('UPSTREAM_URL') ?? raw.upstream;
  const keysGiven = raw.keys !== undefined || raw.keysFile !== undefined;
  // Demo keys only in front of the echo upstream: a real upstream gets no key anyone can read.
  const demoKeys = !keysGiven && upstream === undefined;
  const keys = new Map<string, KeyOwner>(
    demoKeys ? Object.entries(DEMO_KEYS).filter(([, { tier }]) => tierNames?.includes(tier)) : [],
  );
  const inline = new Map<string, KeyOwner>();
  if (raw.keys !== undefined) addKeys(inline, raw.keys, at('keys'), tierNames);
  let keysFile: GatewayConfig['keysFile'];
  if (raw.keysFile !== undefined) {
    const path = resolve(dirname(file as string), checkString(raw.keysFile, at('keysFile')));
    keysFile = { path, tierNames, inline };
    for (const [key, owner] of readKeysFile(keysFile)) keys.set(key, owner);
  }
  for (const [key, owner] of inline) keys.set(key, owner);
  const host = checkString(fromEnv('HOST') ?? raw.host ?? '127.0.0.1', origin('HOST', 'host'));
  const adminToken = checkAdmin(
    fromEnv('SENTINEL_ADMIN_TOKEN'),
    raw.admin,
    origin('SENTINEL_ADMIN_TOKEN', 'admin'),
  );
  const statusPage = checkStatusPage(
    fromEnv('SENTINEL_STATUS_PAGE') ?? raw.statusPage,
    origin('SENTINEL_STATUS_PAGE', 'statusPage'),
    // The demo shows its page; a configured gateway shows it only when asked.
    file === undefined && isLoopback(host),
  );
  if (statusPage && !isLoopback(host) && adminToken === undefined) {
    fail(
      origin('SENTINEL_STATUS_PAGE', 'statusPage'),
      `is on and ${host} is not a loopback address: set admin.token (or SENTINEL_ADMIN_TOKEN), which the page then asks for`,
    );
  }

  return {
    file,
    host,
    port: checkPort(fromEnv('PORT') ?? raw.port ?? 3000, origin('PORT', 'port')),
    upstream:
      upstream === undefined
        ? undefined
        : checkHttpUrl(upstream, origin('UPSTREAM_URL', 'upstream')),
    redisUrl: redisUrl(fromEnv('REDIS_URL'), fromEnv('REDIS_CLUSTER_NODES')),
    keys,
    keysFile,
    keyCacheTtlMs: checkPositiveInteger(raw.keyCacheTtlMs ?? 60_000, at('keyCacheTtlMs')),
    demoKeys,
    routes: checkRoutes(raw.routes ?? [], at('routes')),
    logLevel: checkOneOf(
      fromEnv('LOG_LEVEL') ?? raw.logLevel ?? 'info',
      LOG_LEVELS,
      origin('LOG_LEVEL', 'logLevel'),
    ),
    limiter: {
      tiers,
      defaultTier: raw.defaultTier,
      headers: headerList(fromEnv('SENTINEL_HEADERS')) ?? raw.headers,
      onStoreError: fromEnv('SENTINEL_ON_STORE_ERROR') ?? raw.onStoreError,
      timeout: raw.timeout,
      prefix: raw.prefix,
      ...(raw.shed !== undefined && { shed: shedOf(raw.shed, at('shed')) }),
      ...(raw.quotaLeases !== undefined && { quotaLeases: raw.quotaLeases }),
      // On by default where the SDK exports (see telemetry.ts); the file may turn it off.
      openTelemetry: raw.openTelemetry ?? otlpConfigured(env),
    } as LimiterSettings,
    adminToken,
    statusPage,
  };
}

/**
 * `shed` as a file writes it: Sentinel's own fields, with the critical requests named by path
 * prefix (`criticalPaths`), since a file holds no function. Sentinel checks the rest.
 */
function shedOf(value: unknown, field: string): NonNullable<LimiterSettings['shed']> {
  if (!isRecord(value))
    fail(field, `must be an object such as { concurrency: 1000 }, got ${describe(value)}`);
  const { criticalPaths, ...rest } = value;
  const shed = rest as unknown as NonNullable<LimiterSettings['shed']>;
  if (criticalPaths === undefined) return shed;
  if (
    !Array.isArray(criticalPaths) ||
    !criticalPaths.every((path) => typeof path === 'string' && path.startsWith('/'))
  ) {
    fail(
      `${field}.criticalPaths`,
      `must be a list of paths that start with /, got ${describe(criticalPaths)}`,
    );
  }
  const paths = criticalPaths as string[];
  return {
    ...shed,
    critical: (request) => paths.some((path) => (request as { url: string }).url.startsWith(path)),
  };
}

/** `--config <path>`; the `--` that `pnpm start -- --config x` passes on is skipped. */
function commandLine(argv: readonly string[]): { config?: string } {
  const args = argv[0] === '--' ? argv.slice(1) : [...argv];
  try {
    return parseArgs({ args, options: { config: { type: 'string' } } }).values;
  } catch (error) {
    fail('usage: main.ts [--config <path>]:', message(error));
  }
}

function fail(field: string, problem: string): never {
  throw new ConfigError(`${field} ${problem}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readConfigFile(path: string): FileConfig {
  const text = readText(path);
  let parsed: unknown;
  try {
    parsed = path.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    fail(`${path}:`, `is not valid ${path.endsWith('.json') ? 'JSON' : 'YAML'}: ${message(error)}`);
  }
  if (!isRecord(parsed)) fail(`${path}:`, 'must hold a mapping of fields, such as `port: 3000`');
  return parsed;
}

function readJson(path: string, field: string): unknown {
  try {
    return JSON.parse(readText(path));
  } catch (error) {
    if (error instanceof ConfigError) fail(field, error.message);
    fail(field, `names ${path}, which is not valid JSON: ${message(error)}`);
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    fail(`cannot read ${path}:`, message(error));
  }
}

function message(error: unknown): string {
  return error instanceof Error ? (error.message.split('\n')[0] ?? '') : String(error);
}

function describe(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

function checkString(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') {
    fail(field, `must be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

function checkPositiveInteger(value: unknown, field: string): number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) {
    fail(field, `must be a positive integer, got ${describe(value)}`);
  }
  return value as number;
}

function checkOneOf(value: unknown, allowed: readonly string[], field: string): string {
  if (typeof value !== 'string' || !allowed.includes(value)) {
    fail(field, `must be one of ${allowed.join(', ')}, got ${describe(value)}`);
  }
  return value;
}

function checkPort(value: unknown, field: string): number {
  const port = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (!Number.isInteger(port) || (port as number) < 0 || (port as number) > 65535) {
    fail(field, `must be a port number from 0 to 65535, got ${describe(value)}`);
  }
  return port as number;
}

function checkHttpUrl(value: unknown, field: string): string {
  const text = checkString(value, field);
  if (!URL.canParse(text) || !/^https?:$/.test(new URL(text).protocol)) {
    fail(field, `must be an http:// or https:// URL, got ${describe(value)}`);
  }
  return text;
}

/** REDIS_URL for one server, or REDIS_CLUSTER_NODES, comma-separated, for a Cluster. */
function redisUrl(url: string | undefined, clusterNodes: string | undefined) {
  if (url && clusterNodes) fail('REDIS_URL and REDIS_CLUSTER_NODES', 'are both set: set one');
  return clusterNodes?.split(',').map((node) => node.trim()) ?? url;
}

/** `draft-7,legacy` → a list; `false` → no headers. Sentinel checks the names. */
function headerList(value: string | undefined): SentinelOptions['headers'] {
  if (value === undefined) return undefined;
  if (value === 'false') return false;
  const list = value.split(',').map((format) => format.trim());
  return (list.length === 1 ? list[0] : list) as SentinelOptions['headers'];
}

/** The keys a keys file maps, checked; throws a ConfigError naming the file and entry. */
export function readKeysFile({
  path,
  tierNames,
}: NonNullable<GatewayConfig['keysFile']>): Map<string, KeyOwner> {
  const keys = new Map<string, KeyOwner>();
  addKeys(keys, readJson(path, path), `${path}:`, tierNames);
  return keys;
}

/**
 * Adds `key: tier` or `key: { tenant, tier, policies? }` entries. A bare tier's tenant is the
 * key's fingerprint, so the raw key never becomes part of a Redis key. A key's own policies are
 * checked as Sentinel checks them. Errors name an entry by its position, never by the key itself.
 */
function addKeys(
  keys: Map<string, KeyOwner>,
  entries: unknown,
  field: string,
  tierNames: readonly string[] | undefined,
): void {
  if (!isRecord(entries)) fail(field, `must map API keys to tiers, got ${describe(entries)}`);
  Object.entries(entries).forEach(([key, value], i) => {
    const entry = `${field} (entry ${i + 1})`;
    const tenant = isRecord(value)
      ? { tenant: checkString(value.tenant, `${entry} tenant`), tier: value.tier }
      : { tenant: `key-${fingerprint(key)}`, tier: value };
    const tier = tierNames
      ? checkOneOf(tenant.tier, tierNames, `${entry} tier`)
      : checkString(tenant.tier, `${entry} tier`);
    const owner: KeyOwner = { tenant: tenant.tenant, tier };
    if (isRecord(value) && value.policies !== undefined) {
      owner.policies = checkPolicies(value.policies, `${entry} policies`);
    }
    keys.set(key, owner);
  });
}

/** A key's own policies, checked by building a limiter on them, which names the bad field. */
function checkPolicies(policies: unknown, field: string): TierOptions {
  const store = new MemoryStore();
  try {
    void createLimiter({ store, policies: policies as TierOptions }).close();
  } catch (error) {
    fail(field, message(error).replace(/^@sentinel\/core: /, ''));
  } finally {
    store.close();
  }
  return policies as TierOptions;
}

/**
 * `admin: { token }`, or SENTINEL_ADMIN_TOKEN over it. Errors never quote the token: a line
 * about a secret that ends up in a log must not carry it.
 */
function checkAdmin(fromEnv: string | undefined, admin: unknown, field: string) {
  let token: unknown = fromEnv;
  if (token === undefined && admin !== undefined) {
    if (!isRecord(admin)) fail(field, 'must be { token }');
    const unknown = Object.keys(admin).find((name) => name !== 'token');
    if (unknown !== undefined) fail(`${field}.${unknown}`, 'is not a field; admin has token');
    token = admin.token;
  }
  if (token === undefined) return undefined;
  const at = fromEnv === undefined ? `${field}.token` : field;
  if (typeof token !== 'string' || token.length < MIN_TOKEN_LENGTH) {
    fail(at, `must be a string of at least ${MIN_TOKEN_LENGTH} characters`);
  }
  return token;
}

/** true or false in the file; `1`, `true`, `0` or `false` in the environment. */
function checkStatusPage(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (value === true || value === 'true' || value === '1') return true;
  if (value === false || value === 'false' || value === '0') return false;
  fail(field, `must be true or false (1 or 0), got ${describe(value)}`);
}

function checkRoutes(routes: unknown, field: string): RouteRule[] {
  if (!Array.isArray(routes)) fail(field, `must be a list of { path, cost?, group? }`);
  const seen = new Set<string>();
  return routes.map((route: unknown, i) => {
    const at = `${field}[${i}]`;
    if (!isRecord(route)) fail(at, `must be { path, cost?, group? }, got ${describe(route)}`);
    const { path, cost, group, ...rest } = route;
    const unknown = Object.keys(rest)[0];
    if (unknown !== undefined)
      fail(`${at}.${unknown}`, 'is not a field; a route has path, cost, group');
    if (typeof path !== 'string' || !/^\/[^*?#:]*$/.test(path)) {
      fail(`${at}.path`, `must be a path prefix such as /search, got ${describe(path)}`);
    }
    const prefix = path.replace(/\/+$/, '') || '/';
    if (seen.has(prefix)) fail(`${at}.path`, `repeats ${prefix}`);
    seen.add(prefix);
    return {
      path: prefix,
      ...(cost !== undefined && { cost: checkPositiveInteger(cost, `${at}.cost`) }),
      ...(group !== undefined && { group: checkString(group, `${at}.group`) }),
    };
  });
}
