/**
 * Where a V8 CPU profile spends its time: `node bench/profile-summary.ts <file.cpuprofile> [top]`.
 * Prints self time by function and by package or source file, and total (inclusive) time of
 * the gateway's own functions (src/), so the cost of each step of the request path shows.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

function where(url: string): string {
  if (url === '') return '(native/V8)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  const src = /\/((?:src|dist|bench|examples)\/.*)$/.exec(url);
  if (src) return src[1]!;
  if (url.startsWith('node:')) return url;
  return url;
}

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || '(anonymous)'} ${where(url)}:${lineNumber + 1}`;
}

export function summarise(profile: Profile, top: number): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const total = [...self.values()].reduce((a, b) => a + b, 0);
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const add = (map: Map<string, number>, key: string, value: number) => map.set(key, (map.get(key) ?? 0) + value);
  const byFunction = new Map<string, number>();
  const byPlace = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, time] of self) {
    const node = byId.get(id)!;
    add(byFunction, label(node), time);
    add(byPlace, where(node.callFrame.url), time);
    // Inclusive time of src/ functions: each distinct one on the stack once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!;
      if (!/\/(?:src|dist)\//.test(frame.callFrame.url)) continue;
      const name = label(frame);
      if (!seen.has(name)) {
        seen.add(name);
        add(inclusive, name, time);
      }
    }
  }
  const pct = (time: number) => `${((time / total) * 100).toFixed(1).padStart(5)}%`;
  const list = (title: string, map: Map<string, number>) =>
    [`${title}`, ...[...map].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, time]) => `  ${pct(time)}  ${name}`)].join('\n');
  return [
    `${(total / 1e6).toFixed(1)} s sampled`,
    list('self time by package / file', byPlace),
    list('self time by function', byFunction),
    list('inclusive time of the gateway\'s own functions (src/)', inclusive),
  ].join('\n\n');
}

if (import.meta.main) {
  const [file, top] = process.argv.slice(2);
  if (file === undefined) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile> [top]');
  process.stdout.write(summarise(JSON.parse(readFileSync(file, 'utf8')) as Profile, Number(top ?? 25)) + '\n');
}
