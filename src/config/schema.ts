/**
 * The config file's schema: names, types, defaults and an example for every key. The
 * example is quoted back in errors, so keep one on each leaf. (valibot: ~10 ms to load,
 * against ~100–150 ms for the JSON-Schema builders we tried — start-up time is a feature.)
 */
import { isIP } from 'node:net';
import * as v from 'valibot';
import { choice, int, listenAddress, num, positive, text, textOr } from './fields.ts';

export type { ChannelPolicyConfig } from './fields.ts';

const Log = v.strictObject({
  /** Default info; error for `chat` so the conversation stays readable (`--verbose` overrides it). */
  level: v.optional(v.pipe(v.picklist(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']), v.examples(['info']))),
  /** auto = pretty in a terminal, JSON otherwise. */
  format: choice(['auto', 'json', 'pretty'], 'auto'),
});

const Agent = v.strictObject({
  name: textOr('Switchboard', 'Switchboard'),
  instructions: v.optional(v.pipe(v.string(), v.examples(['Be brief. Answer in the language you are addressed in.'])), ''),
  history_turns: int(0, 10_000, 50),
  max_tool_iterations: int(1, 100, 10),
  /** How deep delegate may nest sub-agents. */
  max_delegate_depth: int(0, 5, 2),
  turn_timeout_seconds: positive(86_400, 300),
  tool_timeout_seconds: positive(3600, 60),
  /** The most recent photos of a conversation the model sees again (older ones: a line of text). */
  max_images: int(0, 20, 4),
});

/** An http(s) URL, optional (each provider kind has its default). */
const urlField = v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://api.openai.com/v1'])));

const providerKind = v.pipe(v.picklist(['openai', 'anthropic', 'gemini']), v.examples(['openai']));
const keyList = v.optional(v.pipe(v.array(text('${OPENAI_API_KEY_2}')), v.examples([['${OPENAI_API_KEY}', '${OPENAI_API_KEY_2}']])), []);
const modelList = v.optional(v.pipe(v.array(text('gpt-4o')), v.examples([['gpt-4o']])), []);

const vision = () => v.optional(v.pipe(v.union([v.literal('auto'), v.boolean()], 'auto, true or false'), v.examples(['auto' as const])), 'auto');

/** One model endpoint: the main provider, a fallback, or a route's own provider. */
const endpoint = {
  kind: providerKind,
  /** Default per kind: OpenAI, Anthropic or Gemini's public API. */
  base_url: urlField,
  model: text('gpt-4o-mini'),
  api_key: v.optional(text('${OPENAI_API_KEY}')),
  /** More keys, rotated when one is rate-limited. */
  api_keys: keyList,
  timeout_seconds: positive(3600, 120),
  temperature: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(2), v.examples([0.7]))),
  max_tokens: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(10_000_000), v.examples([1024]))),
  /** openai kind only: "conservative" strips tool-schema keywords unknown endpoints may reject. */
  tool_schema: choice(['auto', 'conservative'], 'auto'),
  /** Models tried, in order, when the main model keeps failing. */
  fallback_models: modelList,
  /**
   * Photos to the model: true = always send them; false = never (the model gets their name,
   * type and path, as a text model needs); auto = send them, and when the endpoint refuses
   * image input, remember that for the model and fall back to the text description.
   */
  vision: vision(),
};

const Fallback = v.strictObject(endpoint);

const Provider = v.strictObject({
  ...endpoint,
  /** native function calling, XML in the prompt, or native with automatic fallback to XML. */
  tool_calling: choice(['auto', 'native', 'xml'], 'auto'),
  max_retries: int(0, 10, 2),
  /** A Retry-After longer than this is not waited for: the next key or fallback is tried. */
  retry_max_wait_seconds: num(0, 600, 30),
  fallbacks: v.optional(v.array(Fallback), []),
});

const Route = v.strictObject({
  /** Used as model = "hint:<hint>". */
  hint: text('reasoning'),
  model: text('o3-mini'),
  /** Without kind the route uses the main provider's endpoint with this model. */
  kind: v.optional(providerKind),
  base_url: urlField,
  api_key: v.optional(text('${OPENAI_API_KEY}')),
  timeout_seconds: positive(3600, 120),
  /** Photos to this route's own endpoint (with `kind`); without `kind` the main provider's setting holds. */
  vision: vision(),
});

/**
 * Voice notes and audio files to text, through any OpenAI-compatible `/audio/transcriptions`
 * endpoint (OpenAI, Groq, a local whisper server). Absent = off: the model gets the file's
 * name, type and path, as before.
 */
const Transcription = v.strictObject({
  kind: v.pipe(v.picklist(['openai']), v.examples(['openai' as const])),
  base_url: v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://api.openai.com/v1'])), 'https://api.openai.com/v1'),
  model: textOr('whisper-1', 'whisper-1'),
  api_key: v.optional(text('${OPENAI_API_KEY}')),
  /** ISO-639-1 code of the spoken language (better accuracy and speed); absent = detected. */
  language: v.optional(v.pipe(v.string(), v.regex(/^[a-z]{2,3}$/, 'an ISO-639-1 language code such as "en" or "de"'), v.examples(['en']))),
  timeout_seconds: positive(3600, 120),
  /** Retries after the first try on 429, 5xx and network errors (honouring Retry-After). */
  max_retries: int(0, 10, 2),
  /** A Retry-After longer than this is not waited for: the voice note is reported as not transcribed. */
  retry_max_wait_seconds: num(0, 600, 30),
  /** Send the transcript to the person before the answer. */
  echo_transcript: v.optional(v.pipe(v.boolean(), v.examples([false])), false),
  /** Audio files larger than this are not sent (OpenAI takes 25 MB per request). */
  max_audio_mb: positive(1024, 25),
});

type ToolNameList = Array<(typeof toolNames)[number]>;
const toolNames = [
  'current_time', 'shell', 'file_read', 'file_write', 'file_edit', 'glob', 'grep', 'http_request', 'web_fetch', 'schedule', 'delegate',
  'memory_store', 'memory_recall', 'memory_forget', 'send_file',
] as const;
const toolList = (example: ToolNameList) => v.pipe(v.array(v.picklist(toolNames)), v.examples([example]));

const Security = v.strictObject({
  autonomy: choice(['read_only', 'supervised', 'full'], 'supervised'),
  /** Replaces the built-in command allowlist when set. */
  allowed_commands: v.optional(v.pipe(v.array(text('git')), v.examples([['ls', 'cat', 'git']]))),
  /** Added to the allowlist as medium risk (asks in supervised mode). */
  extra_allowed_commands: v.optional(v.pipe(v.array(text('jq')), v.examples([['jq']])), []),
  /** Environment variables passed to commands besides PATH, HOME, LANG (never *_KEY/_TOKEN/_SECRET/_PASSWORD). */
  env_passthrough: v.optional(v.pipe(v.array(text('GIT_AUTHOR_NAME')), v.examples([['GIT_AUTHOR_NAME']])), []),
  command_timeout_seconds: positive(3600, 60),
  max_output_kb: int(1, 10_240, 64),
  /** Most one shell command may write in the workspace (MB), one file (RLIMIT_FSIZE) or all together (free space watched); past it the command is stopped. */
  max_write_mb: int(1, 1_048_576, 256),
  /** Hosts or CIDRs the HTTP tools may reach although private or loopback. */
  allow_hosts: v.optional(v.pipe(v.array(text('127.0.0.1')), v.examples([['127.0.0.1', '10.0.0.0/8']])), []),
  /** Tool calls one person may cause per hour. */
  max_tool_calls_per_hour: int(1, 1_000_000, 120),
  /** People whose hourly tool-call count is kept at once; beyond it the least recently active is forgotten (their count restarts). */
  rate_limit_senders: int(100, 10_000_000, 10_000),
});

const Tools = v.strictObject({
  enabled: v.optional(toolList(['current_time', 'file_read', 'web_fetch']), [...toolNames]),
});

const Embeddings = v.strictObject({
  /** none = keyword-only recall; openai = any OpenAI-compatible /v1/embeddings (OpenAI, Ollama, vLLM…). */
  kind: choice(['none', 'openai'], 'none'),
  base_url: v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['https://api.openai.com/v1'])), 'https://api.openai.com/v1'),
  model: textOr('text-embedding-3-small', 'text-embedding-3-small'),
  api_key: v.optional(text('${OPENAI_API_KEY}')),
  /** Ask the endpoint for vectors of this size (models that support it). */
  dimensions: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(16_384), v.examples([384]))),
  timeout_seconds: positive(600, 30),
  /** Embeddings kept in the cache (LRU, in SQLite). */
  cache_size: int(0, 10_000_000, 10_000),
});

const MemoryConfig = v.strictObject({
  backend: choice(['sqlite', 'markdown', 'none'], 'sqlite'),
  /** Recall relevant memories before each turn and give them to the model. */
  auto_recall: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
  recall_limit: int(0, 50, 4),
  /** Recalled memories scoring below this (0–1) are left out. */
  min_relevance: num(0, 1, 0.4),
  /** Each recalled memory is cut to this many characters. */
  max_entry_chars: int(50, 100_000, 800),
  /** Save each person's messages as conversation memories. */
  auto_save: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
  /** Auto-saved conversation memories are kept this long (0 = forever). */
  conversation_retention_days: num(0, 36_500, 30),
  vector_weight: num(0, 1, 0.7),
  keyword_weight: num(0, 1, 0.3),
  /** How often expired memories are removed and MEMORY_SNAPSHOT.md is rewritten. */
  hygiene_hours: positive(8760, 6),
  /** RAM for the vector index (with embeddings): about dimensions/8 + 64 bytes per memory; past it, newer memories are recalled by keyword only. */
  max_index_mb: positive(65_536, 64),
  embeddings: v.optional(Embeddings, {}),
});

const SubAgent = v.strictObject({
  /** Told to the main agent so it knows when to delegate. */
  description: text('Researches a question on the web and reports back with sources.'),
  instructions: v.optional(v.pipe(v.string(), v.examples(['Be thorough; cite URLs.'])), ''),
  /** Model or "hint:<name>"; default the main model. */
  model: v.optional(text('hint:reasoning')),
  tools: v.optional(toolList(['web_fetch', 'http_request']), []),
  max_tool_iterations: int(1, 100, 6),
  timeout_seconds: positive(3600, 120),
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
  /** Files people send larger than this are described to the model but not downloaded. */
  max_attachment_mb: positive(2048, 20),
  /** compact = keep the V8 heap close to what is live (flat RSS, more CPU under load); v8 = V8's own sizing. */
  heap: choice(['compact', 'v8'], 'compact'),
});

/** Remote tools registered by WebSocket clients at /ws/tools (seed 004). */
const RemoteTools = v.strictObject({
  /** How long the model waits for a client's answer. */
  call_timeout_seconds: positive(600, 30),
  /** Names clients may register; * matches any run of characters. Absent = any valid name. */
  allow: v.optional(v.pipe(v.array(text('phone_*')), v.examples([['phone_*', 'device_info']]))),
  max_tools_per_client: int(1, 1000, 64),
  /** Clients connected at once; one more is refused (WebSocket close 1013, try again later). */
  max_clients: int(1, 1000, 16),
});

/** "127.0.0.1", "::1", "10.0.0.0/8". */
function isAddressOrRange(entry: string): boolean {
  const [address = '', bits] = entry.split('/');
  return isIP(address) !== 0 && (bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (isIP(address) === 4 ? 32 : 128)));
}

const Gateway = v.strictObject({
  /** host:port of the HTTP gateway; loopback by default. Any other address needs `token`. */
  listen: v.optional(listenAddress('127.0.0.1:8787'), '127.0.0.1:8787'),
  /** Bearer token for /api/status, /metrics and remote tools; required off loopback (≥ 16 chars). */
  token: v.optional(text('${SWITCHBOARD_TOKEN}')),
  /** Largest request body accepted (KB); larger gets 413. */
  max_body_kb: int(1, 65_536, 1024),
  /** Most open connections (console pages, tool sockets, webhook callers); past it new ones are closed at once. */
  max_connections: int(1, 65_536, 256),
  /** Absent = no remote tools. */
  remote_tools: v.optional(RemoteTools),
  /** Serve the web console and browser chat at / (loaded on the first request). */
  console: v.optional(v.pipe(v.boolean(), v.examples([true])), true),
  /** How long a console sign-in lasts (hours). */
  session_hours: int(1, 720, 12),
  /**
   * Reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client, for the
   * console's sign-in limit. Empty: the socket's address counts (a forwarded header is ignored).
   */
  trusted_proxies: v.optional(
    v.pipe(
      v.array(v.pipe(v.string(), v.check(isAddressOrRange, 'an IP address or CIDR range, e.g. "127.0.0.1" or "10.0.0.0/8"'))),
      v.examples([['127.0.0.1', '::1']]),
    ),
    [],
  ),
});

const McpServer = v.pipe(
  v.strictObject({
    /** Tool prefix and source label: its tools appear as <name>__<tool>. */
    name: v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_-]{0,31}$/, 'a name of lowercase letters, digits, _ and - (starting with a letter, at most 32)'), v.examples(['files'])),
    /** stdio: the program to start. */
    command: v.optional(text('npx')),
    args: v.optional(v.pipe(v.array(v.string()), v.examples([['-y', '@modelcontextprotocol/server-filesystem', '/srv/share']])), []),
    /** Added to a minimal PATH/HOME/USER environment; the daemon's own secrets are not passed on. */
    env: v.optional(v.pipe(v.record(v.string(), v.string()), v.examples([{ FILES_TOKEN: '${FILES_TOKEN}' }])), {}),
    cwd: v.optional(text('/srv/share')),
    /** Streamable HTTP endpoint, instead of a command. */
    url: v.optional(v.pipe(v.string(), v.regex(/^https?:\/\/\S+$/, 'an http:// or https:// URL'), v.examples(['http://127.0.0.1:9000/mcp']))),
    headers: v.optional(v.pipe(v.record(v.string(), v.string()), v.examples([{ Authorization: 'Bearer ${MCP_TOKEN}' }])), {}),
    /** Per tool call (and for connecting). */
    timeout_seconds: positive(3600, 60),
  }),
  v.check((server) => (server.command === undefined) !== (server.url === undefined), 'set exactly one of command (stdio) and url (streamable HTTP)'),
);

const Mcp = v.strictObject({
  servers: v.optional(v.pipe(v.array(McpServer), v.check((list) => new Set(list.map((s) => s.name)).size === list.length, 'each [[mcp.servers]] needs its own name')), []),
});

/** Where durable state lives: SQLite in data_dir (one machine), or PostgreSQL (one or more nodes, see [cluster]). */
const Store = v.pipe(v.strictObject({
  kind: choice(['sqlite', 'postgres'], 'sqlite'),
  /** kind = "postgres": the server, e.g. postgres://switchboard:${PGPASSWORD}@db.internal:5432/switchboard. */
  url: v.optional(v.pipe(v.string(), v.regex(/^postgres(?:ql)?:\/\/\S+$/, 'a postgres:// connection string'), v.examples(['postgres://switchboard:secret@db.internal:5432/switchboard']))),
  /** kind = "postgres": connections this node keeps open at most. */
  max_connections: int(2, 200, 10),
}), v.check((store) => store.kind !== 'postgres' || store.url !== undefined, 'kind = "postgres" needs url (postgres://user:password@host:5432/database)'));

/** Several nodes on one PostgreSQL ([store] kind = "postgres"). */
const Cluster = v.strictObject({
  /** This node's name in status and metrics. Default: the host name. */
  node: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, 'a node name: letters, digits, ., _ and - (at most 63)'), v.examples(['host-a']))),
  /** How soon another node takes over a channel (and a turn) whose node died. */
  failover_seconds: int(3, 600, 15),
});

/** Every table but `[channels.*]`: those are each channel's own (channels/<name>/config.ts). */
const coreEntries = {
  data_dir: textOr('./data', './data'),
  log: v.optional(Log, {}),
  agent: v.optional(Agent, {}),
  provider: Provider,
  routes: v.optional(v.array(Route), []),
  /** Absent = voice notes are described, not transcribed. */
  transcription: v.optional(Transcription),
  security: v.optional(Security, {}),
  tools: v.optional(Tools, {}),
  memory: v.optional(MemoryConfig, {}),
  agents: v.optional(v.record(v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_-]{0,31}$/, 'a name of lowercase letters, digits, _ and - (starting with a letter, at most 32)')), SubAgent), {}),
  runtime: v.optional(Runtime, {}),
  store: v.optional(Store, {}),
  cluster: v.optional(Cluster, {}),
  /** Absent = no HTTP gateway. */
  gateway: v.optional(Gateway),
  mcp: v.optional(Mcp, {}),
};

/** The schema of each `[channels.<name>]` table, by name, in the order errors list them. */
export type ChannelSchemas = Readonly<Record<string, v.GenericSchema>>;

type OptionalEach<C extends ChannelSchemas> = { readonly [K in keyof C]: v.OptionalSchema<C[K], undefined> };

/**
 * The whole config file's schema, with the channels' tables given by the composition root
 * (app/config.ts passes the registry's): src/ knows no channel.
 */
export function configSchema<const C extends ChannelSchemas>(channels: C) {
  const tables = Object.fromEntries(Object.entries(channels).map(([name, schema]) => [name, v.optional(schema)])) as unknown as OptionalEach<C>;
  return v.strictObject({ ...coreEntries, channels: v.optional(v.strictObject(tables), {} as never) });
}

/** A config schema as configSchema() builds it, for some set of channels. */
export type ConfigSchemaOf<C extends ChannelSchemas> = ReturnType<typeof configSchema<C>>;

/**
 * The validated config, defaults filled in, as src/ sees it: each channel's section is that
 * channel's business (typed in its own config.ts).
 */
export type Config = Omit<v.InferOutput<v.StrictObjectSchema<typeof coreEntries, undefined>>, 'channels'> & { readonly channels: Readonly<Record<string, unknown>> };
export type EndpointConfig = v.InferOutput<typeof Fallback>;
export type RouteConfig = v.InferOutput<typeof Route>;
export type TranscriptionConfig = v.InferOutput<typeof Transcription>;
export type GatewayConfig = v.InferOutput<typeof Gateway>;
export type RemoteToolsConfig = v.InferOutput<typeof RemoteTools>;
export type StoreConfig = v.InferOutput<typeof Store>;
export type ClusterConfig = v.InferOutput<typeof Cluster>;
export type ToolName = (typeof toolNames)[number];

/** A schema node as this module builds them: wrappers, pipes, objects and leaves. */
export interface SchemaNode {
  readonly type: string;
  readonly wrapped?: SchemaNode;
  readonly pipe?: readonly SchemaNode[];
  readonly entries?: Readonly<Record<string, SchemaNode>>;
  readonly options?: readonly unknown[];
  readonly requirement?: unknown;
  readonly examples?: readonly unknown[];
  /** A pattern's description (`v.regex(…, 'an http:// or https:// URL')`). */
  readonly message?: unknown;
  readonly item?: SchemaNode;
  readonly value?: SchemaNode;
}

/** Unwraps `optional` and `pipe` down to the base schema plus the pipe's actions. */
export function unwrap(node: SchemaNode): { base: SchemaNode; actions: readonly SchemaNode[] } {
  let current = node;
  while (current.type === 'optional' && current.wrapped) current = current.wrapped;
  if (current.pipe) return { base: current.pipe[0]!, actions: current.pipe.slice(1) };
  return { base: current, actions: [] };
}

/** The schema of the value at `path` (e.g. ["agent", "history_turns"]) under `root`, if there is one. */
export function schemaAt(root: unknown, path: readonly string[]): SchemaNode | undefined {
  let node: SchemaNode | undefined = root as SchemaNode;
  for (const key of path) {
    if (!node) return undefined;
    const base: SchemaNode = unwrap(node).base;
    // lists and records: a numeric index or any record key selects the item schema
    node = base.entries?.[key] ?? (base.type === 'array' && /^\d+$/.test(key) ? base.item : base.type === 'record' ? base.value : undefined);
  }
  return node;
}
