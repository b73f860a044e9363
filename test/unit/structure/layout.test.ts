import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/** docs/architecture.md, "Where things live": the rules the layout keeps, checked from the source itself. */
const SRC = resolve(import.meta.dirname, '../../../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The folder under src/ a file is in; a file at the top (`app.ts`, `version.ts`) is a node of its own. */
function folderOf(file: string): string {
  return relative(SRC, file).split('/')[0]!;
}

const IMPORT = /^(?:import|export)\s[^'"]*?from\s+'(\.{1,2}\/[^']+)'/gm;

/** Folder → the folders its files import from (type-only imports included: a cycle of types is a cycle of ideas). */
function folderGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file);
    for (const match of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const to = folderOf(resolve(dirname(file), match[1]!));
      if (to === from) continue;
      if (!graph.has(from)) graph.set(from, new Set());
      graph.get(from)!.add(to);
    }
  }
  return graph;
}

function cycles(graph: Map<string, Set<string>>): string[][] {
  const found: string[][] = [];
  const visit = (node: string, path: string[]) => {
    for (const next of graph.get(node) ?? []) {
      const at = path.indexOf(next);
      if (at !== -1) found.push([...path.slice(at), next]);
      else visit(next, [...path, next]);
    }
  };
  for (const node of graph.keys()) visit(node, [node]);
  return found;
}

describe('the source layout', () => {
  it('has no import cycle between folders', () => {
    expect(cycles(folderGraph())).toEqual([]);
  });

  it('keeps the error type free of any transport', () => {
    const imports = [...readFileSync(join(SRC, 'errors/gateway-error.ts'), 'utf8').matchAll(/from\s+'([^']+)'/g)].map((match) => match[1]);
    expect(imports).toEqual([]);
  });

  it('has one door: only the door module listens for requests and upgrades', () => {
    const listening = sourceFiles(SRC).filter((file) => /\.on\('(?:request|upgrade)'/.test(readFileSync(file, 'utf8')));
    expect(listening.map((file) => relative(SRC, file))).toEqual(['http/public-server.ts']);
  });

  it('holds no mutable state at module level (caches and counters belong to objects built in build())', () => {
    const offending: string[] = [];
    for (const file of sourceFiles(SRC)) {
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, index) => {
          // A lookup table typed read-only is a constant; a bare collection is a cache or a register.
          const collection = /^(?:export\s+)?const\s+\w+(?::\s*(?<type>[^=]+))?\s*=\s*new\s+(?:Map|WeakMap|Set|WeakSet|LRUCache|Array)\b/.exec(line);
          if (/^(?:export\s+)?let\s/.test(line) || (collection !== null && !/^Readonly/.test(collection.groups?.type?.trim() ?? ''))) {
            offending.push(`${relative(SRC, file)}:${index + 1}: ${line.trim()}`);
          }
        });
    }
    expect(offending).toEqual([]);
  });
});
