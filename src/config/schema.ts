/**
 * The config file's schema: names, types, defaults and an example for every key. The
 * example is quoted back in errors, so keep one on each leaf.
 */
import { Type, type Static, type TLiteral, type TSchema, type TUnion } from '@sinclair/typebox';

const strict = { additionalProperties: false } as const;
const literals = <const T extends string>(values: readonly T[], options: { default?: T; description: string }): TUnion<Array<TLiteral<T>>> =>
  Type.Union(
    values.map((value) => Type.Literal(value)),
    { ...options, examples: [options.default ?? values[0]] },
  );

const Log = Type.Object(
  {
    level: Type.Optional(literals(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'], { description: 'log level (default info; warn for `chat`)' })),
    format: literals(['auto', 'json', 'pretty'], { default: 'auto', description: 'auto = pretty in a terminal, JSON otherwise' }),
  },
  { ...strict, default: {} },
);

const Agent = Type.Object(
  {
    name: Type.String({ minLength: 1, default: 'Switchboard', examples: ['Switchboard'] }),
    instructions: Type.String({ default: '', examples: ['Be brief. Answer in the language you are addressed in.'] }),
    history_turns: Type.Integer({ minimum: 0, maximum: 10_000, default: 50, examples: [50] }),
    max_tool_iterations: Type.Integer({ minimum: 1, maximum: 100, default: 10, examples: [10] }),
    turn_timeout_seconds: Type.Number({ exclusiveMinimum: 0, maximum: 86_400, default: 300, examples: [300] }),
    tool_timeout_seconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600, default: 60, examples: [60] }),
  },
  { ...strict, default: {} },
);

const Provider = Type.Object(
  {
    kind: literals(['openai'], { description: 'an OpenAI-compatible chat-completions endpoint' }),
    base_url: Type.String({ pattern: '^https?://', default: 'https://api.openai.com/v1', examples: ['https://api.openai.com/v1'] }),
    model: Type.String({ minLength: 1, examples: ['gpt-4o-mini'] }),
    api_key: Type.Optional(Type.String({ minLength: 1, examples: ['${OPENAI_API_KEY}'] })),
    timeout_seconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600, default: 120, examples: [120] }),
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2, examples: [0.7] })),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, examples: [1024] })),
  },
  strict,
);

const Runtime = Type.Object(
  {
    max_in_flight: Type.Integer({ minimum: 0, maximum: 1024, default: 0, examples: [0] }),
    max_queued: Type.Integer({ minimum: 1, maximum: 1_000_000, default: 1000, examples: [1000] }),
    shutdown_grace_seconds: Type.Number({ minimum: 0, maximum: 3600, default: 10, examples: [10] }),
    durability: literals(['normal', 'full'], { default: 'normal', description: 'full = fsync every commit' }),
    restart_initial_seconds: Type.Number({ exclusiveMinimum: 0, maximum: 3600, default: 2, examples: [2] }),
    restart_max_seconds: Type.Number({ exclusiveMinimum: 0, maximum: 86_400, default: 60, examples: [60] }),
    restart_reset_seconds: Type.Number({ minimum: 0, maximum: 86_400, default: 60, examples: [60] }),
  },
  { ...strict, default: {} },
);

const Terminal = Type.Object(
  {
    user: Type.Optional(Type.String({ minLength: 1, examples: ['alice'] })),
  },
  strict,
);

const Channels = Type.Object({ terminal: Type.Optional(Terminal) }, { ...strict, default: {} });

export const ConfigSchema = Type.Object(
  {
    data_dir: Type.String({ minLength: 1, default: './data', examples: ['./data'] }),
    log: Log,
    agent: Agent,
    provider: Provider,
    runtime: Runtime,
    channels: Channels,
  },
  strict,
);

/** The validated config, defaults filled in. */
export type Config = Static<typeof ConfigSchema>;
export type TerminalConfig = Static<typeof Terminal>;

/** The schema of the value at `path` (e.g. ["agent", "history_turns"]), if there is one. */
export function schemaAt(path: readonly string[]): TSchema | undefined {
  let schema: TSchema | undefined = ConfigSchema;
  for (const key of path) {
    const properties: Record<string, TSchema> | undefined = (schema as { properties?: Record<string, TSchema> }).properties;
    schema = properties?.[key];
    if (!schema) return undefined;
  }
  return schema;
}
