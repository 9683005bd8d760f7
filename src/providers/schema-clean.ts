/**
 * Tool parameter schemas, cleaned for what each provider's API accepts. Tools are written in
 * full JSON Schema (and MCP servers send whatever they like); providers reject keywords they
 * do not know, so each request sends a cleaned copy. Arguments are still validated against
 * the original schema before a tool runs, so dropping a constraint here only loosens what the
 * model is told, never what is accepted.
 *
 * | keyword                      | openai | anthropic | gemini                           | conservative |
 * |------------------------------|--------|-----------|----------------------------------|--------------|
 * | minLength, maxLength, pattern| keep   | remove    | remove                           | remove       |
 * | $ref, $defs, definitions     | keep   | inline    | inline                           | inline       |
 * | additionalProperties         | keep   | keep      | remove                           | remove       |
 * | anyOf, oneOf                 | keep   | keep      | first non-null alternative       | same         |
 * | allOf                        | keep   | keep      | merged                           | merged       |
 * | type: [T, "null"]            | keep   | keep      | type: T, nullable: true          | type: T      |
 * | const                        | keep   | keep      | enum: [value]                    | same         |
 * | enum of non-strings          | keep   | keep      | moved into the description       | same         |
 * | anything else                | keep   | keep      | only Gemini's Schema subset      | only type, description, properties, required, items, enum |
 *
 * Gemini's subset (an OpenAPI 3.0 Schema object): type, format (string: enum, date-time;
 * number: float, double; integer: int32, int64), description, nullable, enum (strings only),
 * properties, required, items (required on arrays), minItems, maxItems, minimum, maximum.
 */

export type SchemaDialect = 'openai' | 'anthropic' | 'gemini' | 'conservative';

type Schema = Record<string, unknown>;

interface Context {
  readonly root: Schema;
  readonly dialect: Exclude<SchemaDialect, 'openai'>;
  /** `$ref`s being expanded on the current path: meeting one again means a cycle. */
  readonly expanding: string[];
}

/** Keywords whose value is a map of name → schema, a schema, or a list of schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'dependentSchemas']);
const SCHEMA_VALUES = new Set(['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems', 'additionalItems']);
const SCHEMA_LISTS = new Set(['anyOf', 'oneOf', 'allOf', 'prefixItems']);

/** Dropped for Anthropic: string constraints, and definitions once every `$ref` is inlined. */
const ANTHROPIC_DROPPED = new Set(['minLength', 'maxLength', 'pattern', '$defs', 'definitions']);

const GEMINI_FORMATS: Readonly<Record<string, readonly string[]>> = {
  string: ['enum', 'date-time'],
  number: ['float', 'double'],
  integer: ['int32', 'int64'],
};
const GEMINI_NUMBERS = ['minItems', 'maxItems', 'minimum', 'maximum'] as const;

/**
 * Returns a cleaned deep copy of `schema` for `dialect`; the input is never modified.
 *
 * @example
 * cleanSchema({ type: ['string', 'null'], minLength: 1 }, 'gemini') // → { type: 'string', nullable: true }
 */
export function cleanSchema(schema: Readonly<Record<string, unknown>>, dialect: SchemaDialect): Record<string, unknown> {
  if (dialect === 'openai') return structuredClone(schema) as Schema;
  const cleaned = clean(schema, { root: schema, dialect, expanding: ['#'] });
  return isSchema(cleaned) ? cleaned : {};
}

/**
 * `cleanSchema` for one dialect, cleaning each schema object once: a tool keeps its schema
 * object for life and every turn sends every tool (~15 × each turn), so a fresh deep copy per
 * request is work thrown away. One per provider instance (its dialect is fixed), so a schema is
 * never served in another dialect's shape. The result is shared between requests: callers only
 * serialize it, never change it. Weakly keyed: a dropped tool's schema goes with it.
 */
export function createSchemaCleaner(dialect: SchemaDialect): (schema: Readonly<Record<string, unknown>>) => Record<string, unknown> {
  const cleaned = new WeakMap<object, Record<string, unknown>>();
  return (schema) => {
    let wire = cleaned.get(schema);
    if (wire === undefined) cleaned.set(schema, (wire = cleanSchema(schema, dialect)));
    return wire;
  };
}

function clean(node: unknown, ctx: Context): unknown {
  if (!isSchema(node)) return ctx.dialect === 'anthropic' ? structuredClone(node) : {};
  if (typeof node.$ref === 'string') return inlineRef(node, node.$ref, ctx);
  return ctx.dialect === 'anthropic' ? cleanAnthropic(node, ctx) : cleanFlat(node, ctx);
}

/** Replaces `{ $ref, ...siblings }` by the referenced schema, siblings taking precedence. */
function inlineRef(node: Schema, ref: string, ctx: Context): unknown {
  const { $ref: _ref, ...siblings } = node;
  if (ctx.expanding.includes(ref)) {
    // A recursive type (a tree, a linked list): stop at the second visit with a free object.
    return clean({ type: 'object', description: 'Same shape as its parent.', ...siblings }, ctx);
  }
  const target = resolvePointer(ctx.root, ref);
  ctx.expanding.push(ref);
  try {
    return clean(isSchema(target) ? { ...target, ...siblings } : siblings, ctx);
  } finally {
    ctx.expanding.pop();
  }
}

/** Resolves a local JSON pointer (`#/$defs/Item`); `undefined` for anything else. */
function resolvePointer(root: Schema, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  let current: unknown = root;
  let pointer: string;
  try {
    pointer = decodeURIComponent(ref.slice(1));
  } catch {
    return undefined;
  }
  if (pointer === '') return root;
  if (!pointer.startsWith('/')) return undefined;
  for (const token of pointer.slice(1).split('/')) {
    const key = token.replaceAll('~1', '/').replaceAll('~0', '~');
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

function cleanAnthropic(node: Schema, ctx: Context): Schema {
  const out: Schema = {};
  for (const [key, value] of Object.entries(node)) {
    if (ANTHROPIC_DROPPED.has(key)) continue;
    out[key] = cleanChild(key, value, ctx);
  }
  return out;
}

/** Cleans the value of `key` when it holds schemas; copies it otherwise. */
function cleanChild(key: string, value: unknown, ctx: Context): unknown {
  if (SCHEMA_MAPS.has(key) && isSchema(value)) return mapValues(value, (child) => clean(child, ctx));
  if ((SCHEMA_LISTS.has(key) || key === 'items') && Array.isArray(value)) return value.map((child) => clean(child, ctx));
  if (SCHEMA_VALUES.has(key) && isSchema(value)) return clean(value, ctx);
  return structuredClone(value);
}

/** Gemini and conservative: one concrete type per schema, and only the allowed keywords. */
function cleanFlat(node: Schema, ctx: Context): Schema {
  const alternatives = Array.isArray(node.anyOf) ? node.anyOf : Array.isArray(node.oneOf) ? node.oneOf : undefined;
  if (alternatives) {
    const { anyOf: _anyOf, oneOf: _oneOf, ...rest } = node;
    const nonNull = alternatives.filter((alternative) => !isNullSchema(alternative));
    const chosen = nonNull.find(isSchema) ?? {};
    const nullable = nonNull.length < alternatives.length ? { nullable: true } : {};
    return clean({ ...chosen, ...rest, ...nullable }, ctx) as Schema;
  }
  if (Array.isArray(node.allOf)) {
    const { allOf, ...rest } = node;
    return [rest, ...allOf].map((part) => clean(part, ctx) as Schema).reduce(mergeSchemas);
  }

  let type = node.type;
  let nullable = node.nullable === true;
  if (Array.isArray(type)) {
    const types = type.filter((t) => t !== 'null');
    nullable ||= types.length < type.length;
    type = types[0];
  }
  if (type === 'null') {
    type = undefined;
    nullable = true;
  }
  let values = Array.isArray(node.enum) ? node.enum : Object.hasOwn(node, 'const') ? [node.const] : undefined;
  if (values?.includes(null)) {
    values = values.filter((value) => value !== null);
    nullable = true;
  }
  let description = typeof node.description === 'string' ? node.description : undefined;
  if (values && !values.every((value) => typeof value === 'string')) {
    // Gemini takes enums of strings only: say the allowed values in words instead.
    const allowed = `One of: ${values.map((value) => JSON.stringify(value)).join(', ')}.`;
    description = description ? `${description} ${allowed}` : allowed;
    values = undefined;
  }
  if (values?.length === 0) values = undefined;
  if (type === undefined) type = values ? 'string' : isSchema(node.properties) ? 'object' : node.items !== undefined ? 'array' : undefined;

  const gemini = ctx.dialect === 'gemini';
  const out: Schema = {};
  if (typeof type === 'string') out.type = type;
  if (gemini && typeof node.format === 'string' && typeof type === 'string' && GEMINI_FORMATS[type]?.includes(node.format)) out.format = node.format;
  if (description !== undefined) out.description = description;
  if (gemini && nullable) out.nullable = true;
  if (values) out.enum = [...values];
  if (isSchema(node.properties)) out.properties = mapValues(node.properties, (child) => clean(child, ctx));
  if (Array.isArray(node.required) && isSchema(out.properties)) {
    const properties = out.properties;
    const required = [...new Set(node.required.filter((name): name is string => typeof name === 'string' && Object.hasOwn(properties, name)))];
    if (required.length > 0) out.required = required;
  }
  const items = Array.isArray(node.items) ? node.items[0] : node.items;
  if (items !== undefined) out.items = clean(items, ctx);
  // Gemini rejects an array without `items`; strings are the loosest type every model can send.
  else if (type === 'array') out.items = { type: 'string' };
  if (gemini) for (const key of GEMINI_NUMBERS) if (typeof node[key] === 'number') out[key] = node[key];
  return out;
}

/** `allOf` parts combined: properties and required united, otherwise the first part wins. */
function mergeSchemas(into: Schema, part: Schema): Schema {
  const merged: Schema = { ...part, ...into };
  if (isSchema(into.properties) || isSchema(part.properties)) merged.properties = { ...(part.properties as Schema), ...(into.properties as Schema) };
  const required = [...(Array.isArray(into.required) ? into.required : []), ...(Array.isArray(part.required) ? part.required : [])];
  if (required.length > 0) merged.required = [...new Set(required)];
  if (merged.properties !== undefined && merged.type === undefined) merged.type = 'object';
  return merged;
}

function isNullSchema(value: unknown): boolean {
  return isSchema(value) && (value.type === 'null' || (Array.isArray(value.enum) && value.enum.length === 1 && value.enum[0] === null));
}

function mapValues(value: Schema, fn: (child: unknown) => unknown): Schema {
  return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, fn(child)]));
}

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
