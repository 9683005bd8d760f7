/**
 * Validates tool arguments against each tool's JSON Schema before `execute`. Ajv is loaded
 * on the first tool call, not at start-up, and each schema is compiled once.
 *
 * Ajv keeps every schema it compiled for the life of its instance, and tools come and go
 * (remote clients reconnecting, MCP servers restarting, each with schemas of their own): once
 * `maxSchemas` schemas are compiled, the instance and what it compiled are dropped and the
 * schemas still in use are compiled again as they are called.
 *
 * `format` is enforced (ajv-formats: uri, email, date-time, …), and Ajv's own warnings (an
 * unknown format or keyword in a remote tool's schema) go to the pino logger, never to the
 * console: without a logger they are dropped.
 */
import type { Logger } from 'pino';
import type { Tool } from '../tool.ts';

type Check = ((data: unknown) => boolean) & { errors?: Array<{ instancePath: string; message?: string; params: Record<string, unknown> }> | null };

export interface ArgsValidator {
  /** A sentence naming what is wrong, or undefined when the arguments fit the schema. */
  validate(tool: Tool, args: unknown): Promise<string | undefined>;
  /** Schemas compiled and kept now (for tests and health). */
  readonly compiled: number;
}

export interface ArgsValidatorOptions {
  /** Compiled schemas kept before Ajv starts afresh. @default 1000 */
  readonly maxSchemas?: number;
  /** Where Ajv's warnings go (e.g. `unknown format "x" ignored`). @default none: dropped */
  readonly log?: Logger;
}

/** A value of each common format, so a model that got one wrong sees what is expected. */
const formatExamples: Readonly<Record<string, string>> = {
  uri: 'https://example.com/page',
  url: 'https://example.com/page',
  email: 'name@example.com',
  'date-time': '2026-01-31T09:30:00Z',
  date: '2026-01-31',
  time: '09:30:00Z',
  uuid: '123e4567-e89b-12d3-a456-426614174000',
  ipv4: '192.0.2.1',
  hostname: 'example.com',
};

export function createArgsValidator(options: ArgsValidatorOptions = {}): ArgsValidator {
  const maxSchemas = options.maxSchemas ?? 1000;
  if (!(Number.isInteger(maxSchemas) && maxSchemas >= 1)) throw new TypeError(`createArgsValidator: maxSchemas must be a positive whole number, got ${maxSchemas}`);
  let ajv: Promise<{ compile(schema: object): Check }> | undefined;
  /** Schema object → its check (tools built from one schema share it: see createSchemaInterner). */
  let compiled = new Map<object, Check>();
  const log = options.log;
  // Ajv calls log/warn/error with a message and sometimes an object (the schema path).
  const text = (args: unknown[]): string => args.map((arg) => (typeof arg === 'string' ? arg : JSON.stringify(arg))).join(' ');
  const logger = log
    ? { log: (...args: unknown[]) => log.debug(text(args)), warn: (...args: unknown[]) => log.warn(text(args)), error: (...args: unknown[]) => log.error(text(args)) }
    : (false as const);
  const load = async () => {
    const [{ Ajv }, formats] = await Promise.all([import('ajv'), import('ajv-formats')]);
    const ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true, logger });
    // ajv-formats is CommonJS: `default` is its module.exports, the plugin, which also carries
    // itself as `.default` — the one spelling both TypeScript and Node agree on.
    formats.default.default(ajv);
    return ajv;
  };
  return {
    get compiled() {
      return compiled.size;
    },
    async validate(tool, args) {
      const schema = tool.parameters as object;
      let check = compiled.get(schema);
      if (!check) {
        if (compiled.size >= maxSchemas) {
          ajv = undefined;
          compiled = new Map();
        }
        ajv ??= load();
        check = (await ajv).compile(schema);
        compiled.set(schema, check);
      }
      if (check(args)) return undefined;
      const problems = (check.errors ?? []).slice(0, 5).map((error) => {
        const where = error.instancePath === '' ? 'arguments' : error.instancePath.slice(1).replace(/\//g, '.');
        if (typeof error.params.additionalProperty === 'string') return `unknown argument "${error.params.additionalProperty}"`;
        if (typeof error.params.missingProperty === 'string') return `missing required argument "${error.params.missingProperty}"`;
        if (Array.isArray(error.params.allowedValues)) return `${where} must be one of ${error.params.allowedValues.map((v) => JSON.stringify(v)).join(', ')}`;
        if (typeof error.params.format === 'string') {
          const example = formatExamples[error.params.format];
          return `${where} must be a valid ${error.params.format}${example === undefined ? '' : `, like "${example}"`}`;
        }
        return `${where} ${error.message ?? 'is invalid'}`;
      });
      return `Invalid arguments for ${tool.name}: ${problems.join('; ')}.`;
    },
  };
}
