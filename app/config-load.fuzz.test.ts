/**
 * Fuzzing config files: any text, and the shipped example (every channel enabled) with keys
 * removed, values of the wrong type, unknown keys (also `__proto__`, `constructor`) — gives a
 * config, or a ConfigError listing at least one problem, each naming its key ("" for a file
 * that is not TOML); never a TypeError or a stack trace.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { parse, stringify } from 'smol-toml';
import { fuzz, nastyText } from '../test/support/fuzz.ts';
import { ConfigError, parseConfig } from './config.ts';

const example = readFileSync(join(import.meta.dirname, '..', 'switchboard.example.toml'), 'utf8');
const start = example.indexOf('# [channels.terminal]');
const enabled = example.slice(0, start) + example.slice(start).replace(/^# (\[|[a-z_]+ = )/gm, '$1');
const names = [...new Set(enabled.match(/\$\{([A-Z_][A-Z0-9_]*)\}/g)?.map((ref) => ref.slice(2, -1)) ?? [])];
const env = Object.fromEntries(names.map((name) => [name, `value-of-${name}`]));
const valid = parse(enabled) as Record<string, unknown>;

/** A TOML value of any type. */
const tomlValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { weight: 4, arbitrary: fc.oneof(nastyText(20).map((s) => s.replace(/[\uD800-\uDFFF]/g, '')), fc.integer(), fc.double({ noNaN: true }), fc.boolean(), fc.constantFrom('${MISSING_VAR}', '${bad name}', '127.0.0.1:99999', '-1', '')) },
    { weight: 1, arbitrary: fc.array(tie('value'), { maxLength: 3 }) },
    { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('a', 'enabled', 'token', 'constructor', 'toString', '__proto__'), tie('value'), { maxKeys: 2 }) },
  ),
})).value;

type Table = Record<string, unknown>;
const isTable = (value: unknown): value is Table => typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Date);

/** Every dotted path to a value in the config, tables included. */
function paths(table: Table, prefix: string[] = []): string[][] {
  return Object.entries(table).flatMap(([key, value]) => [[...prefix, key], ...(isTable(value) ? paths(value, [...prefix, key]) : [])]);
}
const allPaths = paths(valid);

const mutation = fc.record({
  path: fc.constantFrom(...allPaths),
  kind: fc.constantFrom('delete', 'replace', 'add'),
  key: fc.constantFrom('unknown_key', 'constructor', 'toString', '__proto__', 'hasOwnProperty', 'enabeld'),
  value: tomlValue,
});

function mutate(mutations: ReadonlyArray<{ path: string[]; kind: string; key: string; value: unknown }>): string {
  const config = structuredClone(valid);
  for (const { path, kind, key, value } of mutations) {
    let table: Table = config;
    for (const part of path.slice(0, -1)) {
      const next = table[part];
      if (!isTable(next)) return stringify(config);
      table = next;
    }
    const last = path.at(-1)!;
    if (kind === 'delete') delete table[last];
    else if (kind === 'replace') table[last] = value;
    else if (isTable(table[last])) Object.defineProperty(table[last], key, { value, enumerable: true, configurable: true, writable: true });
  }
  return stringify(config);
}

function check(text: string): void {
  try {
    parseConfig(text, 'fuzz.toml', env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `not a ConfigError: ${error instanceof Error ? error.stack : String(error)}`);
    assert.ok(error.problems.length > 0, 'a ConfigError without a problem');
    for (const problem of error.problems) {
      assert.equal(typeof problem.path, 'string');
      assert.ok(problem.problem.length > 0);
    }
    assert.ok(error.message.startsWith('Config error in fuzz.toml:'));
  }
}

describe('config files (fuzz)', () => {
  it('the example with every channel enabled is valid (the base of the mutations)', () => {
    parseConfig(enabled, 'fuzz.toml', env);
  });

  it('a mutated valid config gives a config or a ConfigError naming each problem key', (t) => {
    fuzz(t, 'config (mutated)', fc.array(mutation, { minLength: 1, maxLength: 4 }), (mutations) => {
      const text = mutate(mutations);
      check(text);
      // a problem at a key names that key (or a key inside it)
      try {
        parseConfig(text, 'fuzz.toml', env);
      } catch (error) {
        for (const problem of (error as ConfigError).problems) assert.ok(problem.path === '' || allPaths.some((p) => problem.path.startsWith(p[0]!)) || /^[a-z_]/.test(problem.path), problem.path);
      }
    }, { runs: 150 });
  });

  it('any text gives a config or a ConfigError', (t) => {
    const line = fc.oneof(
      nastyText(40),
      fc.constantFrom('[agent]', '[[mcp.servers]]', '[channels.telegram]', 'token = "x"', 'a = [1, "2"]', 'x = { y = 1 }', 'd = 1979-05-27T07:32:00Z', '"quoted key" = 1', 'k = """', 'k = \'\'\'', '[a.b.c]', '= 1', 'k = 0x1F', 'k = inf', 'k = nan'),
      fc.tuple(fc.constantFrom(...allPaths.map((p) => p.join('.'))), tomlValue).map(([key, value]) => {
        try {
          return `${key} = ${stringify({ v: value }).trim().slice(4)}`;
        } catch {
          return `${key} = 1`;
        }
      }),
    );
    fuzz(t, 'config (text)', fc.array(line, { maxLength: 12 }).map((lines) => lines.join('\n')), check, { runs: 300 });
  });

  it('keys named like Object.prototype members are unknown keys, named as such', () => {
    for (const key of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      assert.throws(() => parseConfig(`${enabled}\n[agent.x]\n`.replace('[agent]', `[agent]\n${key} = 1`), 'fuzz.toml', env), (error: unknown) => error instanceof ConfigError && error.problems.some((p) => p.path === `agent.${key}`));
    }
  });
});
