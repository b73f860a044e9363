/* Markdown read as GitHub renders it: for the docs' link check and the runbooks' anchors. */

/** The file's lines outside fenced code blocks (``` or ~~~), with their line numbers. */
export function proseLines(text: string): { line: string; number: number }[] {
  const out: { line: string; number: number }[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((line, index) => {
    const marker = /^\s{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker !== undefined) {
      if (fence === undefined) fence = marker;
      else if (marker.startsWith(fence)) fence = undefined;
      return;
    }
    if (fence === undefined) out.push({ line, number: index + 1 });
  });
  return out;
}

/**
 * GitHub's heading anchors (github-slugger): the heading's text as rendered (inline code
 * unwrapped, links reduced to their text, emphasis markers dropped), lower-cased, every
 * character that is not a letter, mark, number, `_`, `-` or space removed, spaces turned
 * into `-`; a repeated anchor gets `-1`, `-2`, … in order.
 */
export function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(text)) {
    const explicit = line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g);
    for (const match of explicit) anchors.add(match[1]!);
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const rendered = heading
      .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
      .replace(/`([^`]*)`/g, '$1')
      .replace(/<[^>]+>/g, '');
    const base = rendered.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '').replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}
