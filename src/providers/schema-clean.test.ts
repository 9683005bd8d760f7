import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cleanSchema, createSchemaCleaner, type SchemaDialect } from './schema-clean.ts';

type Schema = Record<string, unknown>;
const dialects: readonly SchemaDialect[] = ['openai', 'anthropic', 'gemini', 'conservative'];

/** One row per rule: the input and what each dialect must send (`same` = unchanged). */
const table: ReadonlyArray<{ name: string; input: Schema } & Partial<Record<SchemaDialect, Schema | 'same'>>> = [
  {
    name: 'string constraints',
    input: { type: 'string', minLength: 1, maxLength: 9, pattern: '^a' },
    openai: 'same',
    anthropic: { type: 'string' },
    gemini: { type: 'string' },
    conservative: { type: 'string' },
  },
  {
    name: 'additionalProperties',
    input: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false },
    openai: 'same',
    anthropic: 'same',
    gemini: { type: 'object', properties: { a: { type: 'string' } } },
    conservative: { type: 'object', properties: { a: { type: 'string' } } },
  },
  {
    name: 'nullable type array',
    input: { type: ['string', 'null'], description: 'd' },
    openai: 'same',
    anthropic: 'same',
    gemini: { type: 'string', description: 'd', nullable: true },
    conservative: { type: 'string', description: 'd' },
  },
  {
    name: 'anyOf with null',
    input: { anyOf: [{ type: 'integer', minimum: 0 }, { type: 'null' }], description: 'count' },
    openai: 'same',
    anthropic: 'same',
    gemini: { type: 'integer', description: 'count', nullable: true, minimum: 0 },
    conservative: { type: 'integer', description: 'count' },
  },
  {
    name: 'oneOf without null keeps the first alternative',
    input: { oneOf: [{ type: 'string', format: 'date-time' }, { type: 'number' }] },
    openai: 'same',
    anthropic: 'same',
    gemini: { type: 'string', format: 'date-time' },
    conservative: { type: 'string' },
  },
  {
    name: 'allOf merged',
    input: { allOf: [{ properties: { a: { type: 'string' } }, required: ['a'] }, { properties: { b: { type: 'number' } } }], description: 'both' },
    anthropic: 'same',
    gemini: { type: 'object', description: 'both', properties: { a: { type: 'string' }, b: { type: 'number' } }, required: ['a'] },
  },
  {
    name: 'const and enum of non-strings',
    input: { type: 'object', properties: { kind: { const: 'file' }, level: { type: 'integer', enum: [1, 2], description: 'Level.' } } },
    openai: 'same',
    anthropic: 'same',
    gemini: { type: 'object', properties: { kind: { type: 'string', enum: ['file'] }, level: { type: 'integer', description: 'Level. One of: 1, 2.' } } },
  },
  {
    name: 'keywords outside the subset',
    input: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      $id: 'x',
      title: 'T',
      type: 'object',
      properties: {
        when: { type: 'string', format: 'date', default: 'today', examples: ['2024-01-01'] },
        ratio: { type: 'number', exclusiveMinimum: 0, maximum: 1, format: 'double' },
        tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 3, uniqueItems: true },
      },
      required: ['when', 'missing'],
    },
    openai: 'same',
    gemini: {
      type: 'object',
      properties: {
        when: { type: 'string' },
        ratio: { type: 'number', format: 'double', maximum: 1 },
        tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 3 },
      },
      required: ['when'],
    },
    conservative: { type: 'object', properties: { when: { type: 'string' }, ratio: { type: 'number' }, tags: { type: 'array', items: { type: 'string' } } }, required: ['when'] },
  },
  {
    name: 'arrays get items',
    input: { type: 'array', description: 'anything' },
    openai: 'same',
    anthropic: 'same',
    gemini: { type: 'array', description: 'anything', items: { type: 'string' } },
  },
  {
    name: 'property names that look like keywords stay',
    input: { type: 'object', properties: { pattern: { type: 'string', pattern: 'x' }, $ref: { type: 'string' } } },
    anthropic: { type: 'object', properties: { pattern: { type: 'string' }, $ref: { type: 'string' } } },
    gemini: { type: 'object', properties: { pattern: { type: 'string' }, $ref: { type: 'string' } } },
  },
  {
    name: '$ref inlined, definitions dropped',
    input: {
      type: 'object',
      properties: { item: { $ref: '#/$defs/Item', description: 'The item.' }, old: { $ref: '#/definitions/Old' } },
      $defs: { Item: { type: 'object', properties: { id: { type: 'string', minLength: 3 } }, description: 'An item.' } },
      definitions: { Old: { type: 'integer' } },
    },
    openai: 'same',
    anthropic: { type: 'object', properties: { item: { type: 'object', properties: { id: { type: 'string' } }, description: 'The item.' }, old: { type: 'integer' } } },
    gemini: { type: 'object', properties: { item: { type: 'object', description: 'The item.', properties: { id: { type: 'string' } } }, old: { type: 'integer' } } },
  },
  {
    name: 'nested through items and anyOf',
    input: { type: 'array', items: { anyOf: [{ $ref: '#/$defs/S' }, { type: 'null' }] }, $defs: { S: { type: 'string', pattern: 'x' } } },
    anthropic: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'null' }] } },
    gemini: { type: 'array', items: { type: 'string', nullable: true } },
  },
];

describe('cleanSchema', () => {
  for (const row of table) {
    for (const dialect of dialects) {
      const expected = row[dialect];
      if (expected === undefined) continue;
      it(`${row.name} (${dialect})`, () => {
        const input = structuredClone(row.input);
        const output = cleanSchema(input, dialect);
        assert.deepEqual(output, expected === 'same' ? row.input : expected);
        assert.deepEqual(input, row.input, 'the input is not modified');
        assert.notEqual(output, input, 'a copy, never the input itself');
      });
    }
  }

  it('stops at a recursive $ref instead of expanding forever', () => {
    const tree = {
      type: 'object',
      properties: { root: { $ref: '#/$defs/Node' } },
      $defs: { Node: { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#/$defs/Node' } } } } },
    };
    for (const dialect of ['anthropic', 'gemini', 'conservative'] as const) {
      const cleaned = cleanSchema(tree, dialect);
      const root = (cleaned.properties as Record<string, Schema>).root!;
      const children = (root.properties as Record<string, Schema>).children!;
      assert.equal((children.items as Schema).type, 'object', dialect);
      assert.equal((children.items as Schema).properties, undefined, dialect);
      assert.ok(!JSON.stringify(cleaned).includes('$ref'), dialect);
    }
    const self = { type: 'object', properties: { next: { $ref: '#' } } };
    assert.deepEqual(cleanSchema(self, 'gemini'), { type: 'object', properties: { next: { type: 'object', description: 'Same shape as its parent.' } } });
  });

  it('drops a $ref it cannot resolve, keeping its siblings', () => {
    assert.deepEqual(cleanSchema({ type: 'object', properties: { a: { $ref: 'https://example.com/x.json', description: 'ext' } } }, 'gemini'), {
      type: 'object',
      properties: { a: { description: 'ext' } },
    });
  });

  it('returns a deep copy for openai, sharing nothing with the input', () => {
    const input = { type: 'object', properties: { a: { type: 'string' } } };
    const output = cleanSchema(input, 'openai');
    (output.properties as Record<string, Schema>).a!.type = 'number';
    assert.equal(input.properties.a.type, 'string');
  });
});

describe('createSchemaCleaner', () => {
  it("cleans each schema object once, in its own dialect's shape", () => {
    const schema = { type: 'object', properties: { name: { type: ['string', 'null'], minLength: 1 } }, additionalProperties: false };
    for (const dialect of dialects) {
      const cleanerOf = createSchemaCleaner(dialect);
      const first = cleanerOf(schema);
      assert.deepEqual(first, cleanSchema(schema, dialect), dialect);
      assert.equal(cleanerOf(schema), first, `${dialect}: the same object at the next request`);
      assert.notEqual(cleanerOf(structuredClone(schema)), first, `${dialect}: another schema object is cleaned on its own`);
    }
    assert.notDeepEqual(createSchemaCleaner('gemini')(schema), createSchemaCleaner('anthropic')(schema), 'one cleaner per dialect: no shape served to the wrong one');
  });
});
