import { readFileSync } from 'node:fs';

/** The package version (8.y.z: the platform's 8.x release line), read once. */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
