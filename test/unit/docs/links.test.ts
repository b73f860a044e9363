import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../../src/config/env.ts';
import { headingAnchors, proseLines } from '../../support/markdown.ts';

/*
 * The documentation cannot drift from the repository: every relative link in the Markdown
 * resolves to a file (and, with a `#fragment`, to a heading of it, by GitHub's anchor rules),
 * nothing points outside the repository, and the configuration page lists exactly the
 * variables the config schema reads.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Folders whose Markdown is someone else's or generated. */
const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'data', 'coverage', '.git', '.tmp']);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return SKIPPED_DIRS.has(entry.name) || entry.name.startsWith('.') ? [] : markdownFiles(path);
    return entry.name.endsWith('.md') ? [path] : [];
  });
}

const FILES = markdownFiles(ROOT).map((path) => relative(ROOT, path)).sort();

/** A line with its inline code spans blanked: a link shown as code is not a link. */
function withoutCodeSpans(line: string): string {
  return line.replace(/(`+)[^`]*?\1/g, (span) => ' '.repeat(span.length));
}

interface Link {
  file: string;
  line: number;
  target: string;
}

/** Inline links and images, and reference definitions, outside code. */
function linksOf(file: string): Link[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const links: Link[] = [];
  for (const { line, number } of proseLines(text)) {
    const prose = withoutCodeSpans(line);
    for (const match of prose.matchAll(/!?\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ file, line: number, target: match[1]! });
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$/.exec(prose);
    if (definition) links.push({ file, line: number, target: definition[1]! });
  }
  return links;
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target);

/** What is wrong with one relative link, or undefined when it resolves. */
function brokenBecause(link: Link): string | undefined {
  const hash = link.target.indexOf('#');
  const pathPart = decodeURIComponent(hash === -1 ? link.target : link.target.slice(0, hash));
  const fragment = hash === -1 ? undefined : decodeURIComponent(link.target.slice(hash + 1));
  const resolved = pathPart === '' ? join(ROOT, link.file) : resolve(ROOT, dirname(link.file), pathPart);
  const inside = relative(ROOT, resolved);
  if (inside === '..' || inside.startsWith(`..${sep}`)) return 'points outside the repository';
  if (!existsSync(resolved)) return `no such file: ${inside}`;
  if (fragment === undefined || fragment === '') return undefined;
  if (statSync(resolved).isDirectory() || !resolved.endsWith('.md')) return `an anchor on a file that has no headings: ${inside}`;
  const anchors = headingAnchors(readFileSync(resolved, 'utf8'));
  return anchors.has(fragment) ? undefined : `no heading with the anchor #${fragment} in ${inside}`;
}

/** Words that name the design notes and spec this project was started from, which are not part of it. */
const OUTSIDE_FILES = /\.\.\/shared|shared\/(?:design|spec)|interface\.md|style\.md|api-keys-sp[e]c/;

describe('documentation links', () => {
  it('finds the pages it checks', () => {
    expect(FILES).toEqual(expect.arrayContaining(['README.md', 'docs/configuration.md', 'docs/architecture.md', 'CONTRIBUTING.md']));
  });

  it('slugs headings as GitHub does', () => {
    const anchors = headingAnchors('# Holding under abuse\n## `KEY_CACHE_SIZE` and memory\n## Two doors, one decision\n## Faults\n## Faults\n```\n# not a heading\n```\n### What the upstream receives, and may trust (RFC 9110 §7.6.1)\n');
    expect([...anchors]).toEqual([
      'holding-under-abuse',
      'key_cache_size-and-memory',
      'two-doors-one-decision',
      'faults',
      'faults-1',
      'what-the-upstream-receives-and-may-trust-rfc-9110-761',
    ]);
  });

  it.each(FILES)('every relative link in %s resolves, file and heading', (file) => {
    const broken = linksOf(file)
      .filter((link) => !isExternal(link.target))
      .flatMap((link) => {
        const why = brokenBecause(link);
        return why === undefined ? [] : [`${link.file}:${link.line}: ${link.target}: ${why}`];
      });
    expect(broken).toEqual([]);
  });

  it.each(FILES)('%s names no file outside the repository', (file) => {
    const hits = readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .flatMap((line, index) => (OUTSIDE_FILES.test(line) ? [`${file}:${index + 1}: ${line.trim()}`] : []));
    expect(hits).toEqual([]);
  });
});

/** The files whose comments and strings must cite only the repository's own docs or an RFC. */
function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'results' ? [] : sourceFiles(path);
    return /\.(ts|js|ya?ml|json|md)$/.test(entry.name) ? [path] : [];
  });
}

describe('sources cite only the repository', () => {
  it('no file under src/, test/, bench/, config/, deploy/ or examples/ names a file outside the repository', () => {
    const hits = ['src', 'test', 'bench', 'config', 'deploy', 'examples'].flatMap(sourceFiles).flatMap((file) =>
      readFileSync(join(ROOT, file), 'utf8')
        .split('\n')
        .flatMap((line, index) =>
          OUTSIDE_FILES.test(line) || /\b(?:architecture|performance)\.md\b/.test(line.replace(/docs\/(?:architecture|performance)\.md/g, ''))
            ? [`${file}:${index + 1}: ${line.trim()}`]
            : [],
        ),
    );
    expect(hits).toEqual([]);
  });
});

/** The variables listed in docs/configuration.md: the first cell of every table whose first header cell is "variable". */
function documentedVariables(text: string): string[] {
  const names: string[] = [];
  let inVariableTable = false;
  for (const { line } of proseLines(text)) {
    if (!line.trimStart().startsWith('|')) {
      inVariableTable = false;
      continue;
    }
    const cells = line.split('|').slice(1, -1).map((cell) => cell.trim());
    if (/^-+$|^:?-+:?$/.test(cells[0] ?? '')) continue;
    if (!inVariableTable) {
      inVariableTable = (cells[0] ?? '').toLowerCase() === 'variable';
      continue;
    }
    for (const match of (cells[0] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)) names.push(match[1]!);
  }
  return names;
}

describe('docs/configuration.md', () => {
  const text = readFileSync(join(ROOT, 'docs/configuration.md'), 'utf8');
  const listed = documentedVariables(text);

  it('lists every variable the config schema reads, and no other', () => {
    expect([...new Set(listed)].sort()).toEqual(Object.keys(envSchema.shape).sort());
  });

  it('lists each variable once', () => {
    expect(listed.filter((name, index) => listed.indexOf(name) !== index)).toEqual([]);
  });
});
