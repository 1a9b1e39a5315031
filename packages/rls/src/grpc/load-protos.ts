// The .proto files the service speaks, loaded from the package's proto/ directory, which sits at
// ../../proto from src/grpc in the repository and at ../proto from dist/ when published.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSync, type PackageDefinition } from '@grpc/proto-loader';

/** What the server loads; each file pulls in the ones it imports. */
const FILES = ['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'] as const;

let loaded: PackageDefinition | undefined;

/**
 * The service's definitions, as proto-loader gives them to grpc-js: fields in camelCase, enums
 * and 64-bit integers as numbers, every field filled in (absent messages as null). The
 * google/protobuf well-known types come bundled with protobufjs.
 */
export function loadProtos(): PackageDefinition {
  loaded ??= loadSync([...FILES], {
    includeDirs: [protoDir()],
    longs: Number,
    defaults: true,
  });
  return loaded;
}

/** The first proto/ directory holding the service's files, from this module upwards. */
export function protoDir(): string {
  const start = moduleDir();
  for (let dir = start; ; dir = dirname(dir)) {
    const candidate = join(dir, 'proto');
    if (existsSync(join(candidate, FILES[0]))) return candidate;
    if (dirname(dir) === dir) throw new Error(`@sentinel/rls: no proto/${FILES[0]} above ${start}`);
  }
}

/** This module's directory; the CommonJS build rewrites import.meta.url to come from __filename. */
function moduleDir(): string {
  return dirname(fileURLToPath(import.meta.url));
}
