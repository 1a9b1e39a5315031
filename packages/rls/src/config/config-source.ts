// Where the configuration files are, as envoyproxy/ratelimit's settings say, and their text.
import type { Dirent } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseGoBool } from '../go-bool.ts';
import { ConfigError } from './config-error.ts';

/**
 * The files named by `--config`, or else upstream's runtime directory:
 * RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
 */
export type ConfigSource =
  | { readonly kind: 'files'; readonly files: readonly string[] }
  | {
      readonly kind: 'directory';
      /** Every file in it and in its subdirectories is a configuration file. */
      readonly directory: string;
      /** RUNTIME_ROOT: a symlink that a deployment swaps to publish a new configuration. */
      readonly root: string;
      /** RUNTIME_IGNOREDOTFILES: skip files and directories whose name starts with a dot. */
      readonly ignoreDotFiles: boolean;
    };

/** One file's text, named by its path. */
export interface ConfigText {
  readonly path: string;
  readonly text: string;
}

/**
 * Where to read the configuration: the `--config` files, in order, when there are any; else
 * the runtime directory the environment names, with upstream's defaults.
 * @example configSource(process.env, ['config/app.yaml'])
 */
export function configSource(env: NodeJS.ProcessEnv, files: readonly string[]): ConfigSource {
  if (files.length > 0) return { kind: 'files', files };
  const root = setting(env, 'RUNTIME_ROOT') ?? '/srv/runtime_data/current';
  const dotFiles = setting(env, 'RUNTIME_IGNOREDOTFILES') ?? 'false';
  const ignoreDotFiles = parseGoBool(dotFiles);
  if (ignoreDotFiles === undefined) {
    throw new ConfigError(
      'RUNTIME_IGNOREDOTFILES',
      undefined,
      `must be true or false, got '${dotFiles}'`,
    );
  }
  return {
    kind: 'directory',
    directory: join(
      root,
      setting(env, 'RUNTIME_SUBDIRECTORY') ?? '',
      setting(env, 'RUNTIME_APPDIRECTORY') ?? 'config',
    ),
    root,
    ignoreDotFiles,
  };
}

/**
 * Every configuration file's text, in a stable order, and the directories that hold them. In a
 * directory, every file counts, whatever its name ends with, at any depth, as upstream's
 * runtime loader reads them; a symlink to a file is read, one to a directory is not followed.
 */
export async function collect(
  source: ConfigSource,
): Promise<{ texts: ConfigText[]; directories: string[] }> {
  const { files, directories } =
    source.kind === 'files'
      ? {
          files: source.files,
          directories: [...new Set(source.files.map((file) => dirname(file)))],
        }
      : await listDirectory(source.directory, source.ignoreDotFiles, true);
  const texts = await Promise.all(files.map((path) => readText(path, source.kind === 'files')));
  return { texts: texts.filter((text) => text !== undefined), directories };
}

/** The files and the directories under `directory`, depth first, by name. */
async function listDirectory(
  directory: string,
  ignoreDotFiles: boolean,
  top: boolean,
): Promise<{ files: string[]; directories: string[] }> {
  const found = { files: [] as string[], directories: [directory] };
  let entries: Dirent[];
  try {
    entries = await readdir(directory, { withFileTypes: true });
  } catch (error) {
    // A subdirectory removed while it is listed is simply gone; the directory itself must be.
    if (!top && isCode(error, 'ENOENT')) return { files: [], directories: [] };
    throw new ConfigError(directory, undefined, `cannot list the configuration: ${reason(error)}`);
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (ignoreDotFiles && entry.name.startsWith('.')) continue;
    const path = join(directory, entry.name);
    if (entry.isDirectory()) {
      const inner = await listDirectory(path, ignoreDotFiles, false);
      found.files.push(...inner.files);
      found.directories.push(...inner.directories);
    } else {
      found.files.push(path);
    }
  }
  return found;
}

/**
 * A file's text; undefined for a directory's entry that is gone or is itself a directory (a
 * symlink to one). A file named by `--config` must be there.
 */
async function readText(path: string, named: boolean): Promise<ConfigText | undefined> {
  try {
    return { path, text: await readFile(path, 'utf8') };
  } catch (error) {
    if (!named && (isCode(error, 'ENOENT') || isCode(error, 'EISDIR'))) return undefined;
    throw new ConfigError(path, undefined, `cannot read: ${reason(error)}`);
  }
}

/** A variable's value; an empty one counts as unset. */
function setting(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

function isCode(error: unknown, code: string): boolean {
  return (error as NodeJS.ErrnoException | undefined)?.code === code;
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
