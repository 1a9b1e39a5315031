// Where the configuration files are, as upstream's runtime settings say, and reloading them
// when they change: a bad change is reported and the last good configuration stays.
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type ConfigError,
  type ConfigSource,
  configSource,
  type RateLimitConfig,
  readConfig,
  watchConfig,
} from '@sentinel/rls';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../harness/wait-for.ts';
import { limitOf } from './config-fixtures.ts';

/** A one-domain file whose key `k` allows `count` a second. */
const file = (domain: string, count: number) =>
  `domain: ${domain}\ndescriptors:\n  - key: k\n    rate_limit: { unit: second, requests_per_unit: ${count} }\n`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sentinel-rls-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('configSource', () => {
  it("takes the --config files when there are any, and upstream's directory otherwise", () => {
    expect(configSource({}, ['a.yaml', 'b.yaml'])).toEqual({
      kind: 'files',
      files: ['a.yaml', 'b.yaml'],
    });
    expect(configSource({}, [])).toEqual({
      kind: 'directory',
      directory: '/srv/runtime_data/current/config',
      root: '/srv/runtime_data/current',
      ignoreDotFiles: false,
    });
  });

  it('joins RUNTIME_ROOT, RUNTIME_SUBDIRECTORY and RUNTIME_APPDIRECTORY', () => {
    const env = {
      RUNTIME_ROOT: '/data/current',
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_APPDIRECTORY: 'limits',
      RUNTIME_IGNOREDOTFILES: 'True',
    };
    expect(configSource(env, [])).toEqual({
      kind: 'directory',
      directory: '/data/current/ratelimit/limits',
      root: '/data/current',
      ignoreDotFiles: true,
    });
  });

  it('refuses a RUNTIME_IGNOREDOTFILES that Go would not read as a boolean', () => {
    expect(() => configSource({ RUNTIME_IGNOREDOTFILES: 'yes' }, [])).toThrow(
      "RUNTIME_IGNOREDOTFILES: must be true or false, got 'yes'",
    );
  });
});

describe('readConfig', () => {
  const directory = (ignoreDotFiles = false): ConfigSource => ({
    kind: 'directory',
    directory: join(dir, 'config'),
    root: dir,
    ignoreDotFiles,
  });

  it('reads every file of the directory and its subdirectories, whatever its name', async () => {
    await mkdir(join(dir, 'config', 'team'), { recursive: true });
    await writeFile(join(dir, 'config', 'a.yaml'), file('a', 1));
    await writeFile(join(dir, 'config', 'b.yml'), file('b', 2));
    await writeFile(join(dir, 'config', 'team', 'c.conf'), file('c', 3));
    const config = await readConfig(directory());
    expect(config.domains).toEqual(['a', 'b', 'c']);
  });

  it('reads dot files unless RUNTIME_IGNOREDOTFILES, which skips dot directories too', async () => {
    await mkdir(join(dir, 'config', '..2024_01_01'), { recursive: true });
    await writeFile(join(dir, 'config', 'a.yaml'), file('a', 1));
    await writeFile(join(dir, 'config', '.hidden.yaml'), file('hidden', 1));
    await writeFile(join(dir, 'config', '..2024_01_01', 'b.yaml'), file('b', 1));
    expect([...(await readConfig(directory())).domains].sort()).toEqual(['a', 'b', 'hidden']);
    expect((await readConfig(directory(true))).domains).toEqual(['a']);
  });

  it('reads a symlink to a file, and does not follow one to a directory', async () => {
    await mkdir(join(dir, 'config'), { recursive: true });
    await mkdir(join(dir, 'elsewhere'));
    await writeFile(join(dir, 'elsewhere', 'a.yaml'), file('a', 1));
    await symlink(join(dir, 'elsewhere', 'a.yaml'), join(dir, 'config', 'linked.yaml'));
    await symlink(join(dir, 'elsewhere'), join(dir, 'config', 'linked-dir'));
    expect((await readConfig(directory())).domains).toEqual(['a']);
  });

  it('merges the files of one domain when asked', async () => {
    await mkdir(join(dir, 'config'));
    await writeFile(join(dir, 'config', 'a.yaml'), file('shared', 1));
    await writeFile(
      join(dir, 'config', 'b.yaml'),
      file('shared', 2).replace('key: k', 'key: other'),
    );
    await expect(readConfig(directory())).rejects.toThrow(
      /b\.yaml: domain: 'shared' is already defined/,
    );
    const merged = await readConfig(directory(), { mergeDomains: true });
    expect(limitOf(merged, 'shared', [['other', 'x']])?.rule.requestsPerUnit).toBe(2);
  });

  it('refuses a missing directory, naming it', async () => {
    await expect(readConfig(directory())).rejects.toThrow(
      `${join(dir, 'config')}: cannot list the configuration: ENOENT`,
    );
  });

  it('reads the --config files in order, and refuses a missing one', async () => {
    await writeFile(join(dir, 'b.yaml'), file('b', 1));
    await writeFile(join(dir, 'a.yaml'), file('a', 1));
    const files = [join(dir, 'b.yaml'), join(dir, 'a.yaml')];
    expect((await readConfig({ kind: 'files', files })).domains).toEqual(['b', 'a']);
    const missing = join(dir, 'missing.yaml');
    await expect(readConfig({ kind: 'files', files: [missing] })).rejects.toThrow(
      `${missing}: cannot read: ENOENT`,
    );
  });

  it('names the file at fault in a bad one', async () => {
    await mkdir(join(dir, 'config'));
    await writeFile(
      join(dir, 'config', 'bad.yaml'),
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: foos }\n',
    );
    await expect(readConfig(directory())).rejects.toThrow(
      `${join(dir, 'config', 'bad.yaml')}: descriptors[0].rate_limit.unit: unknown unit 'foos'`,
    );
  });
});

describe('watchConfig', () => {
  /** Watches `source`, keeping what a service keeps: the last good configuration. */
  async function watching(source: ConfigSource) {
    const state = {
      config: await readConfig(source),
      loads: 0,
      errors: [] as ConfigError[],
    };
    const watcher = watchConfig(
      source,
      {},
      (config: RateLimitConfig) => {
        state.config = config;
        state.loads += 1;
      },
      (error) => state.errors.push(error),
    );
    // The watcher notes what the files say before it reports changes to them.
    await new Promise((resolve) => setTimeout(resolve, 200));
    return { state, watcher };
  }
  const count = (config: RateLimitConfig, domain = 'd') =>
    limitOf(config, domain, [['k', 'x']])?.rule.requestsPerUnit;

  it('reloads a changed file, keeps the last good one when a change is bad, and recovers', async () => {
    await mkdir(join(dir, 'config'));
    const path = join(dir, 'config', 'limits.yaml');
    await writeFile(path, file('d', 1));
    const { state, watcher } = await watching({
      kind: 'directory',
      directory: join(dir, 'config'),
      root: dir,
      ignoreDotFiles: false,
    });
    try {
      await writeFile(path, file('d', 2));
      await waitFor(() => state.loads === 1, 5_000, 'the reload');
      expect(count(state.config)).toBe(2);

      await writeFile(
        path,
        'domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: foos }\n',
      );
      await waitFor(() => state.errors.length === 1, 5_000, 'the error');
      expect(state.errors[0]?.message).toBe(
        `${path}: descriptors[0].rate_limit.unit: unknown unit 'foos' (expected second, minute, hour, day, week, month, year)`,
      );
      expect(state.loads).toBe(1);
      expect(count(state.config)).toBe(2);

      await writeFile(path, file('d', 3));
      await waitFor(() => state.loads === 2, 5_000, 'the recovery');
      expect(count(state.config)).toBe(3);
    } finally {
      watcher.close();
    }
  });

  it('sees a file added in a new subdirectory, and one removed', async () => {
    await mkdir(join(dir, 'config'));
    await writeFile(join(dir, 'config', 'a.yaml'), file('a', 1));
    const { state, watcher } = await watching({
      kind: 'directory',
      directory: join(dir, 'config'),
      root: dir,
      ignoreDotFiles: false,
    });
    try {
      await mkdir(join(dir, 'config', 'team'));
      await new Promise((resolve) => setTimeout(resolve, 300));
      await writeFile(join(dir, 'config', 'team', 'b.yaml'), file('b', 1));
      await waitFor(() => state.config.domains.includes('b'), 5_000, 'the new domain');
      await rm(join(dir, 'config', 'a.yaml'));
      await waitFor(() => !state.config.domains.includes('a'), 5_000, 'the domain gone');
      expect(state.config.domains).toEqual(['b']);
      expect(state.errors).toEqual([]);
    } finally {
      watcher.close();
    }
  });

  it('reports a configuration directory removed, and keeps the last good configuration', async () => {
    await mkdir(join(dir, 'config'));
    await writeFile(join(dir, 'config', 'a.yaml'), file('d', 1));
    const { state, watcher } = await watching({
      kind: 'directory',
      directory: join(dir, 'config'),
      root: dir,
      ignoreDotFiles: false,
    });
    try {
      await rm(join(dir, 'config'), { recursive: true });
      await waitFor(() => state.errors.length > 0, 5_000, 'the error');
      expect(state.errors[0]?.message).toMatch(/config: cannot list the configuration: ENOENT/);
      expect(state.loads).toBe(0);
      expect(count(state.config)).toBe(1);
    } finally {
      watcher.close();
    }
  });

  it('reloads when RUNTIME_ROOT, a symlink, is swapped for another directory', async () => {
    for (const [version, count] of [
      ['v1', 1],
      ['v2', 2],
    ] as const) {
      await mkdir(join(dir, version, 'config'), { recursive: true });
      await writeFile(join(dir, version, 'config', 'limits.yaml'), file('d', count));
    }
    const root = join(dir, 'current');
    await symlink(join(dir, 'v1'), root);
    const { state, watcher } = await watching({
      kind: 'directory',
      directory: join(root, 'config'),
      root,
      ignoreDotFiles: false,
    });
    try {
      expect(count(state.config)).toBe(1);
      // As a deployment swaps it: a new link, renamed over the old one.
      await symlink(join(dir, 'v2'), join(dir, 'next'));
      await rename(join(dir, 'next'), root);
      await waitFor(() => state.loads === 1, 5_000, 'the reload');
      expect(count(state.config)).toBe(2);
      // The new directory is the one watched now.
      await writeFile(join(dir, 'v2', 'config', 'limits.yaml'), file('d', 3));
      await waitFor(() => state.loads === 2, 5_000, 'the second reload');
      expect(count(state.config)).toBe(3);
    } finally {
      watcher.close();
    }
  });

  it('reloads a --config file replaced as an editor saves it', async () => {
    const path = join(dir, 'limits.yaml');
    await writeFile(path, file('d', 1));
    const { state, watcher } = await watching({ kind: 'files', files: [path] });
    try {
      await writeFile(`${path}.tmp`, file('d', 5));
      await rename(`${path}.tmp`, path);
      await waitFor(() => state.loads === 1, 5_000, 'the reload');
      expect(count(state.config)).toBe(5);
    } finally {
      watcher.close();
    }
  });

  it('reports nothing for a change that leaves the files as they were, or after close', async () => {
    const path = join(dir, 'limits.yaml');
    await writeFile(path, file('d', 1));
    const { state, watcher } = await watching({ kind: 'files', files: [path] });
    await writeFile(path, file('d', 1));
    await writeFile(join(dir, 'unrelated.txt'), 'x');
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(state.loads).toBe(0);
    watcher.close();
    await writeFile(path, file('d', 2));
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(state.loads).toBe(0);
    expect(state.errors).toEqual([]);
  });
});
