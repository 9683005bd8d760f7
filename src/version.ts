import { readFileSync } from 'node:fs';

/** Switchboard's version from package.json (source tree or dist/ layout), or undefined when neither is there. */
export function packageVersion(): string | undefined {
  // src/version.ts in the source tree, a chunk in dist/app/ once built (scripts/build.ts)
  for (const path of ['../package.json', '../../package.json']) {
    try {
      return (JSON.parse(readFileSync(new URL(path, import.meta.url), 'utf8')) as { version: string }).version;
    } catch {
      // try the next layout
    }
  }
  return undefined;
}
