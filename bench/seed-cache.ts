import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { REPO_ROOT, runNode } from './processes.ts';
import type { SeedGroup, SeedResult } from './seed.ts';

/** What a seeded store depends on besides the spec: a change to any of these seeds again. */
const INPUTS = ['src/store', 'src/keys/key-service.ts', 'src/crypto/argon2.ts', 'src/credentials/key-format.ts', 'bench/seed.ts', 'package-lock.json'];

function fingerprint(groups: readonly SeedGroup[]): string {
  const hash = createHash('sha256').update(JSON.stringify(groups));
  const add = (path: string) => {
    const full = join(REPO_ROOT, path);
    if (!existsSync(full)) return;
    if (path.endsWith('.ts') || path.endsWith('.json') || path.endsWith('.sql')) {
      hash.update(path).update(readFileSync(full));
      return;
    }
    for (const entry of readdirSync(full).sort()) add(join(path, entry));
  };
  for (const input of INPUTS) add(input);
  return hash.digest('hex').slice(0, 16);
}

/**
 * A store holding the groups' keys, as a fresh copy in `dataDir` (the embedded store's file).
 * Seeding costs an argon2id hash and a synced commit per key, so the pristine store is kept
 * under the system temp dir, keyed by the spec and the code that shapes it, and copied for
 * each run.
 */
export async function seededStore(groups: readonly SeedGroup[], dataDir: string, fresh: boolean, log: (line: string) => void): Promise<SeedResult> {
  const cacheDir = join(tmpdir(), 'gatehouse-bench-seed', fingerprint(groups));
  if (fresh || !existsSync(join(cacheDir, 'keys.json'))) {
    const building = `${cacheDir}.building-${process.pid}`;
    rmSync(building, { recursive: true, force: true });
    mkdirSync(building, { recursive: true });
    const spec = join(building, 'spec.json');
    writeFileSync(spec, JSON.stringify({ dataDir: join(building, 'data'), groups }));
    log(`seeding ${groups.map((group) => `${group.count} ${group.name}`).join(', ')} keys (cached for later runs) …`);
    log(`  ${(await runNode('bench/seed.ts', [spec, join(building, 'keys.json')])).trim()}`);
    rmSync(cacheDir, { recursive: true, force: true });
    renameSync(building, cacheDir);
  } else {
    log(`using the cached seed ${cacheDir}`);
  }
  cpSync(join(cacheDir, 'data'), dataDir, { recursive: true });
  return JSON.parse(readFileSync(join(cacheDir, 'keys.json'), 'utf8')) as SeedResult;
}

/** Runs one statement on a server connection of its own (CREATE/DROP DATABASE cannot run in a transaction). */
export async function onServer(serverUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

export interface SeededDatabase {
  url: string;
  keys: SeedResult;
  drop(): Promise<void>;
}

/**
 * The same on PostgreSQL: the seeded database is kept as a template
 * (`gatehouse_bench_seed_<fingerprint>`) and each run gets a copy (`CREATE DATABASE … TEMPLATE`).
 */
export async function seededDatabase(groups: readonly SeedGroup[], serverUrl: string, fresh: boolean, log: (line: string) => void): Promise<SeededDatabase> {
  const print = fingerprint(groups);
  const template = `gatehouse_bench_seed_${print}`;
  const keysFile = join(tmpdir(), 'gatehouse-bench-seed', `${print}.postgres-keys.json`);
  const withDatabase = (name: string) => {
    const url = new URL(serverUrl);
    url.pathname = `/${name}`;
    return url.toString();
  };
  if (fresh || !existsSync(keysFile)) {
    await onServer(serverUrl, `DROP DATABASE IF EXISTS ${template} WITH (FORCE)`);
    await onServer(serverUrl, `CREATE DATABASE ${template}`);
    const building = mkdtempSync(join(tmpdir(), 'gatehouse-bench-pg-'));
    try {
      const spec = join(building, 'spec.json');
      writeFileSync(spec, JSON.stringify({ databaseUrl: withDatabase(template), dataDir: building, groups }));
      log(`seeding ${groups.map((group) => `${group.count} ${group.name}`).join(', ')} keys on PostgreSQL (kept as ${template}) …`);
      log(`  ${(await runNode('bench/seed.ts', [spec, join(building, 'keys.json')])).trim()}`);
      mkdirSync(join(tmpdir(), 'gatehouse-bench-seed'), { recursive: true });
      renameSync(join(building, 'keys.json'), keysFile);
    } finally {
      rmSync(building, { recursive: true, force: true });
    }
  } else {
    log(`using the seeded PostgreSQL template ${template}`);
  }
  const name = `gatehouse_bench_${process.pid}_${Date.now().toString(36)}`;
  await onServer(serverUrl, `CREATE DATABASE ${name} TEMPLATE ${template}`);
  return {
    url: withDatabase(name),
    keys: JSON.parse(readFileSync(keysFile, 'utf8')) as SeedResult,
    drop: () => onServer(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}
