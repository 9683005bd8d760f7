import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { packageVersion } from './version.ts';

describe('packageVersion', () => {
  it('reads the version of package.json', () => {
    const expected = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
    assert.equal(packageVersion(), expected);
  });
});
