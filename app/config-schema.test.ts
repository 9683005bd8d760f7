/**
 * A table test over the whole schema: for every key, a wrong value gets a message that
 * describes that key (not a neighbour's form — `channels.matrix.user_id` once said "must be
 * an http:// or https:// URL"), and the example quoted with it is itself valid.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { stringify } from 'smol-toml';
import * as v from 'valibot';
import { ConfigError, ConfigSchema, parseConfig } from './config.ts';
import { unwrap, type SchemaNode } from '../src/config/schema.ts';

interface Leaf {
  /** The key's path as errors name it (`mcp.servers.0.name`). */
  readonly path: readonly string[];
  readonly node: SchemaNode;
}

/** Every key that is not itself a table, through tables, lists of tables and named tables. */
function leaves(node: SchemaNode, path: readonly string[] = []): Leaf[] {
  const { base } = unwrap(node);
  if (base.entries) return Object.entries(base.entries).flatMap(([key, child]) => leaves(child, [...path, key]));
  if (base.type === 'array' && base.item && unwrap(base.item).base.entries) return leaves(base.item, [...path, '0']);
  if (base.type === 'record' && base.value && unwrap(base.value).base.entries) return leaves(base.value, [...path, 'helper']);
  return [{ path, node }];
}

/** A config object with `value` at `path` (lists for numeric steps), beside a minimal provider. */
function configWith(path: readonly string[], value: unknown): Record<string, unknown> {
  const root: Record<string, unknown> = { provider: { kind: 'openai', model: 'gpt-4o-mini' } };
  let here: Record<string, unknown> | unknown[] = root;
  path.forEach((step, index) => {
    const last = index === path.length - 1;
    const nextIsIndex = !last && /^\d+$/.test(path[index + 1]!);
    const container = here as Record<string, unknown>;
    if (last) container[step] = value;
    else if (/^\d+$/.test(step)) {
      const list = here as unknown[];
      list[0] ??= {};
      here = list[0] as Record<string, unknown>;
    } else {
      container[step] ??= nextIsIndex ? [] : {};
      here = container[step] as Record<string, unknown>;
    }
  });
  return root;
}

function messageFor(path: readonly string[], value: unknown): { line: string; example: string | undefined } {
  const key = path.join('.');
  try {
    parseConfig(stringify(configWith(path, value)), 'test.toml', { OPENAI_API_KEY: 'sk-test' });
  } catch (error) {
    assert.ok(error instanceof ConfigError, String(error));
    const lines = error.message.split('\n');
    const at = lines.findIndex((line) => line.startsWith(`  ${key}: `));
    assert.ok(at >= 0, `no message names ${key}:\n${error.message}`);
    const next = lines[at + 1];
    return { line: lines[at]!, example: next?.startsWith('      e.g. ') ? next.slice('      e.g. '.length) : undefined };
  }
  assert.fail(`${key} = ${JSON.stringify(value)} was accepted`);
}

const all = leaves(ConfigSchema as unknown as SchemaNode);

describe('every config key: its message and its example agree', () => {
  it('walks the whole schema', () => {
    assert.ok(all.length > 150, `only ${all.length} keys found`);
    for (const wanted of ['channels.matrix.user_id', 'mcp.servers.0.name', 'channels.email.imap.host', 'agents.helper.instructions']) {
      assert.ok(all.some((leaf) => leaf.path.join('.') === wanted), `${wanted} not walked`);
    }
  });

  for (const leaf of all) {
    const key = leaf.path.join('.');
    it(key, () => {
      const { base, actions } = unwrap(leaf.node);
      const examples = actions.find((action) => action.type === 'examples')?.examples ?? [];
      for (const example of examples) {
        assert.ok(v.safeParse(leaf.node as unknown as v.GenericSchema, example).success, `${key}: its example ${JSON.stringify(example)} is not valid for it`);
      }
      const pattern = actions.find((action) => action.type === 'regex');
      if (pattern) {
        assert.equal(typeof pattern.message, 'string', `${key}: a pattern needs its own description (v.regex(…, 'what it is'))`);
        if (/URL/.test(String(pattern.message))) {
          for (const example of examples) assert.match(String(example), /^https?:\/\//, `${key}: says URL but its example is not one`);
        }
      }
      // A wrong type: a table where a value belongs; text where a table of names belongs.
      const wrong = base.type === 'record' ? 'text' : { wrong: 1 };
      const { line, example } = messageFor(leaf.path, wrong);
      if (pattern) assert.ok(line.includes(String(pattern.message)), `${key}: ${line}`);
      if (base.type === 'number') assert.match(line, /must be a (whole )?number/);
      if (base.type === 'boolean') assert.match(line, /must be true or false/);
      if (base.type === 'array') assert.match(line, /must be a list/);
      if (base.type === 'record') assert.match(line, /must be a table/);
      assert.doesNotMatch(line, /has the wrong type/);
      if (base.type === 'string' && !pattern) assert.match(line, /must be a (non-empty )?string/);
      if (base.type === 'picklist') assert.match(line, /must be (one of )?"/);
      if (examples.length > 0) {
        assert.ok(example, `${key}: no example line after ${line}`);
        assert.ok(example.includes(`${leaf.path.at(-1)} = `), `${key}: example ${example}`);
      }
    });
  }

  it('says what a Matrix user id is when user_id is a table', () => {
    const { line, example } = messageFor(['channels', 'matrix', 'user_id'], { wrong: 1 });
    assert.match(line, /must be a Matrix user id, @name:server, got a table/);
    assert.doesNotMatch(line, /URL/);
    assert.equal(example, '[channels.matrix] user_id = "@switchboard:example.org"');
  });
});

describe('vision', () => {
  const parse = (extra: string) =>
    parseConfig(`[provider]\nkind = "openai"\nmodel = "m"\n${extra}\n[[routes]]\nhint = "eyes"\nkind = "gemini"\nmodel = "gemini-2.5-flash"\nvision = true\n`, 'test.toml', {});

  it('is auto by default and takes true or false per provider, fallback and route', () => {
    const config = parse('vision = false\n[[provider.fallbacks]]\nkind = "anthropic"\nmodel = "claude"\n');
    assert.equal(config.provider.vision, false);
    assert.equal(config.provider.fallbacks[0]!.vision, 'auto');
    assert.equal(config.routes[0]!.vision, true);
    assert.equal(config.agent.max_images, 4);
  });

  it('names the choices when the value is none of them', () => {
    assert.throws(() => parse('vision = "yes"'), (error: unknown) => error instanceof ConfigError && /provider\.vision: must be one of "auto", true, false, got "yes"/.test(error.message));
  });
});
