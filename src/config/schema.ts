/**
 * The config file's schema: names, types, defaults and an example for every key. The
 * example is quoted back in errors, so keep one on each leaf. (valibot: ~10 ms to load,
 * against ~100–150 ms for the JSON-Schema builders we tried — start-up time is a feature.)
 */
import * as v from 'valibot';

/** A whole number in [min, max] with a default. */
const int = (min: number, max: number, fallback: number) =>
  v.optional(v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max), v.examples([fallback])), fallback);

/** A number (fractions allowed) in [min, max] with a default. */
const num = (min: number, max: number, fallback: number) => v.optional(v.pipe(v.number(), v.minValue(min), v.maxValue(max), v.examples([fallback])), fallback);

/** A number in (0, max] with a default: durations that must not be zero. */
const positive = (max: number, fallback: number) => v.optional(v.pipe(v.number(), v.gtValue(0), v.maxValue(max), v.examples([fallback])), fallback);

/** A non-empty string. */
const text = (example: string) => v.pipe(v.string(), v.nonEmpty(), v.examples([example]));

/** A non-empty string with a default. */
const textOr = (example: string, fallback: string) => v.optional(text(example), fallback);

const url = (example: string, fallback: string) => v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/), v.examples([example])), fallback);

const choice = <const T extends string>(values: readonly [T, ...T[]], fallback: T) => v.optional(v.pipe(v.picklist(values), v.examples([fallback])), fallback);

const Log = v.strictObject({
  /** Default info; warn for `chat` so the conversation stays readable. */
  level: v.optional(v.pipe(v.picklist(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']), v.examples(['info']))),
  /** auto = pretty in a terminal, JSON otherwise. */
  format: choice(['auto', 'json', 'pretty'], 'auto'),
});

const Agent = v.strictObject({
  name: textOr('Switchboard', 'Switchboard'),
  instructions: v.optional(v.pipe(v.string(), v.examples(['Be brief. Answer in the language you are addressed in.'])), ''),
  history_turns: int(0, 10_000, 50),
  max_tool_iterations: int(1, 100, 10),
  turn_timeout_seconds: positive(86_400, 300),
  tool_timeout_seconds: positive(3600, 60),
});

const Provider = v.strictObject({
  kind: v.pipe(v.picklist(['openai']), v.examples(['openai'])),
  base_url: url('https://api.openai.com/v1', 'https://api.openai.com/v1'),
  model: text('gpt-4o-mini'),
  api_key: v.optional(text('${OPENAI_API_KEY}')),
  timeout_seconds: positive(3600, 120),
  temperature: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(2), v.examples([0.7]))),
  max_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(10_000_000), v.examples([1024]))),
});

const Runtime = v.strictObject({
  max_in_flight: int(0, 1024, 0),
  max_queued: int(1, 1_000_000, 1000),
  shutdown_grace_seconds: num(0, 3600, 10),
  /** full = fsync every commit (survives power loss, slower). */
  durability: choice(['normal', 'full'], 'normal'),
  restart_initial_seconds: positive(3600, 2),
  restart_max_seconds: positive(86_400, 60),
  restart_reset_seconds: num(0, 86_400, 60),
});

const Terminal = v.strictObject({
  user: v.optional(text('alice')),
});

const Channels = v.strictObject({
  terminal: v.optional(Terminal),
});

export const ConfigSchema = v.strictObject({
  data_dir: textOr('./data', './data'),
  log: v.optional(Log, {}),
  agent: v.optional(Agent, {}),
  provider: Provider,
  runtime: v.optional(Runtime, {}),
  channels: v.optional(Channels, {}),
});

/** The validated config, defaults filled in. */
export type Config = v.InferOutput<typeof ConfigSchema>;
export type TerminalConfig = v.InferOutput<typeof Terminal>;

/** A schema node as this module builds them: wrappers, pipes, objects and leaves. */
export interface SchemaNode {
  readonly type: string;
  readonly wrapped?: SchemaNode;
  readonly pipe?: readonly SchemaNode[];
  readonly entries?: Readonly<Record<string, SchemaNode>>;
  readonly options?: readonly unknown[];
  readonly requirement?: unknown;
  readonly examples?: readonly unknown[];
}

/** Unwraps `optional` and `pipe` down to the base schema plus the pipe's actions. */
export function unwrap(node: SchemaNode): { base: SchemaNode; actions: readonly SchemaNode[] } {
  let current = node;
  while (current.type === 'optional' && current.wrapped) current = current.wrapped;
  if (current.pipe) return { base: current.pipe[0]!, actions: current.pipe.slice(1) };
  return { base: current, actions: [] };
}

/** The schema of the value at `path` (e.g. ["agent", "history_turns"]), if there is one. */
export function schemaAt(path: readonly string[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = ConfigSchema as unknown as SchemaNode;
  for (const key of path) {
    node = node ? unwrap(node).base.entries?.[key] : undefined;
  }
  return node;
}
