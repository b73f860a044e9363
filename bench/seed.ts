/**
 * Creates the benchmark's API keys directly in a store, before the gateway is started on it
 * (the embedded store is one process at a time). Run as a process:
 *
 *   node bench/seed.ts <spec.json> <out.json>
 *
 * Each group of the spec is created through KeyService with its own argon2id parameters:
 * keys that a scenario verifies cold use the configured parameters; the many keys of
 * `events-many-keys` (verified during warm-up, then served from the cache) use cheap ones so
 * 10,000 of them are created in seconds. A hash carries its parameters, so the gateway
 * verifies each with the parameters it was made with.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Argon2Hasher } from '../src/crypto/argon2.ts';
import { KeyService } from '../src/keys/key-service.ts';
import { openStore } from '../src/store/open.ts';

/** Who the audit trail says created the benchmark's keys. */
const SEEDER = { kind: 'cli', id: 'bench', address: null } as const;

export interface SeedGroup {
  name: string;
  count: number;
  scopes: string[];
  agentId: number | null;
  argon2: { memoryKiB: number; timeCost: number; parallelism: number };
  /** The keys' own rate limit; none when absent. */
  rateLimit?: { requests: number; perSeconds: number };
}

export interface SeedSpec {
  databaseUrl?: string;
  dataDir: string;
  groups: SeedGroup[];
}

export type SeedResult = Record<string, string[]>;

const IN_FLIGHT = 16;

async function seed(spec: SeedSpec): Promise<SeedResult> {
  const store = await openStore({ databaseUrl: spec.databaseUrl, dataDir: spec.dataDir });
  const result: SeedResult = {};
  try {
    for (const group of spec.groups) {
      const keys = new KeyService({
        store,
        hasher: new Argon2Hasher({ ...group.argon2, concurrency: 2 }),
        licenceLimit: null,
        listener: { keyChanged: async () => {} },
        now: () => new Date(),
      });
      const created: string[] = new Array(group.count);
      let next = 0;
      const worker = async () => {
        for (let index = next++; index < group.count; index = next++) {
          const request = { name: `bench ${group.name} ${index}`, agentId: group.agentId, scopes: group.scopes, expiresAt: null, rateLimit: group.rateLimit ?? null };
          const { key } = await keys.createKey(request, SEEDER);
          created[index] = key;
        }
      };
      await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, group.count) }, worker));
      result[group.name] = created;
    }
  } finally {
    await store.close();
  }
  return result;
}

if (import.meta.main) {
  const [specPath, outPath] = process.argv.slice(2);
  if (specPath === undefined || outPath === undefined) throw new Error('usage: node bench/seed.ts <spec.json> <out.json>');
  const spec = JSON.parse(readFileSync(specPath, 'utf8')) as SeedSpec;
  const started = performance.now();
  const result = await seed(spec);
  writeFileSync(outPath, JSON.stringify(result));
  const counts = Object.entries(result).map(([name, keys]) => `${name}=${keys.length}`).join(' ');
  process.stdout.write(`seeded ${counts} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
