// One small interface over the Redis client libraries Sentinel supports, with one adapter each.
import calculateSlot from 'cluster-key-slot';
import { describe, fail } from '../../shared/validation.ts';

/** What the Redis store needs of a client, whichever library made it. */
export interface RedisConnection {
  evalsha(sha1: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  eval(source: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  fcall(name: string, keys: readonly string[], args: readonly string[]): Promise<unknown>;
  /** Loads a function library, replacing one of its name, on the server or every Cluster master. */
  loadLibrary(source: string): Promise<unknown>;
  del(keys: readonly string[]): Promise<unknown>;
  /** `'ready'` to send now; otherwise connecting, reconnecting or closed. */
  isReady(): boolean;
  /** Whether the client may still connect on its own: not closed for good. */
  isClosed(): boolean;
  /** Calls `listener` on every (re)connection; returns the unsubscribe. */
  onReady(listener: () => void): () => void;
  /** Starts a connection the client defers to its first command (ioredis `lazyConnect`). */
  connectIfLazy(): void;
  /**
   * Opens the connections to a Cluster's masters that the client defers to each master's first
   * command, so that a burst does not wait on them. Nothing for a standalone client.
   */
  connectServers(): void;
  /** Whether an error is Redis answering with an error, rather than the connection failing. */
  isReplyError(error: unknown): boolean;
  /**
   * The server a command on `key` goes to: its Cluster master's `host:port`, '?' while the slot
   * table does not know it, '' for a standalone client.
   */
  serverOf(key: string): string;
  /** Closes the connection: politely while Redis answers, at once when it does not. */
  close(): Promise<void>;
}

/** How long a polite QUIT may take before the connection is simply dropped. */
const QUIT_WAIT_MS = 500;

/** QUIT when connected, bounded; then drop the socket, so nothing reconnects or hangs. */
async function closeConnection(
  ready: boolean,
  quit: () => Promise<unknown>,
  drop: () => unknown,
): Promise<void> {
  if (ready) {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise((resolve) => {
      timer = setTimeout(resolve, QUIT_WAIT_MS);
      timer.unref();
    });
    await Promise.race([quit().catch(() => {}), waited]);
    clearTimeout(timer);
  }
  drop();
}

/** The listeners of a client's readiness, behind the one function subscribed to its events. */
interface ReadyListeners {
  readonly listeners: Set<() => void>;
  readonly stop: () => void;
}

/**
 * Each client's ready listeners, behind one subscription of its own: every limiter on a shared
 * client listens twice, for its store and for its breaker, and Node warns of a leak past ten
 * listeners to one event, which six limiters on one client reached.
 */
const readyListeners = new WeakMap<object, ReadyListeners>();

/**
 * Calls `listener` whenever `client` is ready again. `listen` subscribes one function to the
 * client's events and returns what unsubscribes it: the first listener of a client subscribes,
 * and the last to leave unsubscribes.
 */
function onReadyShared(
  client: object,
  listen: (callListeners: () => void) => () => void,
  listener: () => void,
): () => void {
  let shared = readyListeners.get(client);
  if (shared === undefined) {
    const listeners = new Set<() => void>();
    // A copy: a listener may unsubscribe, or subscribe another, while they are called.
    const stop = listen(() => {
      for (const each of [...listeners]) each();
    });
    shared = { listeners, stop };
    readyListeners.set(client, shared);
  }
  // A function of its own, so that one listener given twice is called twice, as `on` would.
  const subscription = () => listener();
  shared.listeners.add(subscription);
  return () => {
    const current = readyListeners.get(client);
    if (current === undefined || !current.listeners.delete(subscription)) return;
    if (current.listeners.size > 0) return;
    current.stop();
    readyListeners.delete(client);
  };
}

/** An ioredis (5 or 6) or iovalkey `Redis` or `Cluster`. */
export interface IoredisLikeClient {
  readonly status: string;
  evalsha(sha1: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  eval(source: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  fcall(name: string, numKeys: number, ...keysAndArgs: string[]): Promise<unknown>;
  call(command: string, ...args: string[]): Promise<unknown>;
  del(...keys: string[]): Promise<number>;
  connect(): Promise<void>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: 'ready', listener: () => void): unknown;
  removeListener(event: 'ready', listener: () => void): unknown;
  /** True for a `Cluster`. */
  readonly isCluster?: boolean;
  /** A `Cluster`'s connections to its nodes, by role. */
  nodes?(role: 'master'): ReadonlyArray<{
    readonly status: string;
    connect(): Promise<void>;
    call(command: string, ...args: string[]): Promise<unknown>;
  }>;
  /** A `Cluster`'s slot table: for each slot, its master's `host:port` first. */
  readonly slots?: ReadonlyArray<readonly string[] | undefined>;
}

/** A node-redis (`redis` 5 or later) client from `createClient` or `createCluster`. */
export interface NodeRedisLikeClient {
  readonly isOpen: boolean;
  readonly isReady?: boolean;
  evalSha(sha1: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  eval(source: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  fCall(name: string, options: { keys: string[]; arguments: string[] }): Promise<unknown>;
  functionLoad?(source: string, options: { REPLACE: boolean }): Promise<unknown>;
  del(keys: string[]): Promise<number>;
  quit?(): Promise<unknown>;
  close?(): Promise<unknown>;
  destroy?(): unknown;
  disconnect?(): Promise<unknown>;
  on(event: 'ready' | 'connect', listener: () => void): unknown;
  off(event: 'ready' | 'connect', listener: () => void): unknown;
  /** A cluster's slot table: for each slot, its master. */
  readonly slots?: ReadonlyArray<{ readonly master?: { readonly address?: string } } | undefined>;
  /** A cluster's masters, and the client of each. */
  readonly masters?: readonly unknown[];
  nodeClient?(node: unknown): Promise<NodeRedisLikeClient> | NodeRedisLikeClient;
}

export type SupportedRedisClient = IoredisLikeClient | NodeRedisLikeClient;

/** True when `value`'s class, or one it extends, has the given name. */
function isInstanceOfNamed(value: unknown, name: string): boolean {
  for (
    let proto = value && Object.getPrototypeOf(value);
    proto;
    proto = Object.getPrototypeOf(proto)
  ) {
    if (proto.constructor?.name === name) return true;
  }
  return false;
}

// ioredis marks connections that will never come back as 'end'.
const IOREDIS_CLOSED = new Set(['end', 'disconnecting']);

function fromIoredis(client: IoredisLikeClient): RedisConnection {
  return {
    evalsha: (sha1, keys, args) => client.evalsha(sha1, keys.length, ...keys, ...args),
    eval: (source, keys, args) => client.eval(source, keys.length, ...keys, ...args),
    fcall: (name, keys, args) => client.fcall(name, keys.length, ...keys, ...args),
    loadLibrary: (source) =>
      client.isCluster === true
        ? Promise.all(
            (client.nodes?.('master') ?? []).map((node) =>
              node.call('FUNCTION', 'LOAD', 'REPLACE', source),
            ),
          )
        : client.call('FUNCTION', 'LOAD', 'REPLACE', source),
    del: (keys) => client.del(...keys),
    isReady: () => client.status === 'ready',
    isClosed: () => IOREDIS_CLOSED.has(client.status),
    onReady: (listener) =>
      onReadyShared(
        client,
        (callListeners) => {
          client.on('ready', callListeners);
          return () => client.removeListener('ready', callListeners);
        },
        listener,
      ),
    connectIfLazy() {
      if (client.status === 'wait') client.connect().catch(() => {});
    },
    // A Cluster opens a master's connection at its first command, and ioredis holds the command
    // meanwhile (or, without the offline queue, refuses it and retries 100 ms later).
    connectServers() {
      if (client.isCluster !== true) return;
      for (const node of client.nodes?.('master') ?? []) {
        if (node.status === 'wait') node.connect().catch(() => {});
      }
    },
    isReplyError: (error) => error instanceof Error && error.name === 'ReplyError',
    serverOf: (key) =>
      client.isCluster === true ? (client.slots?.[calculateSlot(key)]?.[0] ?? '?') : '',
    close: () =>
      closeConnection(
        client.status === 'ready',
        () => client.quit(),
        () => client.disconnect(),
      ),
  };
}

/** Loads a function library through one node-redis client. */
async function loadOn(client: NodeRedisLikeClient | undefined, source: string): Promise<unknown> {
  if (client?.functionLoad === undefined) throw new Error('This client cannot load functions');
  return client.functionLoad(source, { REPLACE: true });
}

/** node-redis behind RedisConnection: one short adapter per method, as the other clients have. */
function fromNodeRedis(client: NodeRedisLikeClient): RedisConnection {
  let opened = client.isOpen;
  return {
    evalsha: (sha1, keys, args) => client.evalSha(sha1, { keys: [...keys], arguments: [...args] }),
    eval: (source, keys, args) => client.eval(source, { keys: [...keys], arguments: [...args] }),
    fcall: (name, keys, args) => client.fCall(name, { keys: [...keys], arguments: [...args] }),
    loadLibrary: (source) =>
      client.masters === undefined
        ? loadOn(client, source)
        : Promise.all(
            client.masters.map(async (master) => loadOn(await client.nodeClient?.(master), source)),
          ),
    del: (keys) => client.del([...keys]),
    // node-redis 5 clusters have no isReady: open is as ready as they say.
    isReady: () => client.isReady ?? client.isOpen,
    // Closed for good once it was open and is no more; before that the user has yet to connect.
    isClosed() {
      if (client.isOpen) opened = true;
      return opened && !client.isOpen;
    },
    // Clients emit 'ready'; clusters only 'connect', once they know the slots. A client's
    // 'connect' comes before it is ready, so readiness is checked rather than assumed.
    onReady: (listener) =>
      onReadyShared(
        client,
        (callListeners) => {
          const ready = () => {
            if (client.isReady ?? client.isOpen) callListeners();
          };
          client.on('ready', ready);
          client.on('connect', ready);
          return () => {
            client.off('ready', ready);
            client.off('connect', ready);
          };
        },
        listener,
      ),
    // node-redis connects only when told; connecting for the user would race their own connect().
    connectIfLazy() {},
    // A node-redis cluster connects to its masters as it connects.
    connectServers() {},
    isReplyError: (error) => isInstanceOfNamed(error, 'ErrorReply'),
    // Only a cluster has a slot table.
    serverOf: (key) =>
      client.slots === undefined ? '' : (client.slots[calculateSlot(key)]?.master?.address ?? '?'),
    close: () =>
      closeConnection(
        (client.isReady ?? client.isOpen) === true,
        async () => {
          await (client.close ? client.close() : client.quit?.());
        },
        () => {
          if (!client.isOpen) return;
          if (client.destroy) client.destroy();
          else client.disconnect?.().catch(() => {});
        },
      ),
  };
}

/** Wraps a supported client; a TypeError names `option` for anything else. */
export function toRedisConnection(client: unknown, option = 'client'): RedisConnection {
  const candidate = client as Partial<IoredisLikeClient & NodeRedisLikeClient> | null;
  if (typeof candidate?.evalsha === 'function' && typeof candidate.status === 'string') {
    return fromIoredis(candidate as IoredisLikeClient);
  }
  if (typeof candidate?.evalSha === 'function' && typeof candidate.isOpen === 'boolean') {
    return fromNodeRedis(candidate as NodeRedisLikeClient);
  }
  if (typeof client === 'string') {
    fail(option, `must be a client, got a string: pass a URL as \`redisUrl\``);
  }
  fail(
    option,
    `must be an ioredis, iovalkey or node-redis client (Redis or Cluster), got ${describe(client)}`,
  );
}
