/**
 * Validates tool arguments against each tool's JSON Schema before `execute`. Ajv is loaded
 * on the first tool call, not at start-up, and each schema is compiled once.
 *
 * Ajv keeps every schema it compiled for the life of its instance, and tools come and go
 * (remote clients reconnecting, MCP servers restarting, each with schemas of their own): once
 * `maxSchemas` schemas are compiled, the instance and what it compiled are dropped and the
 * schemas still in use are compiled again as they are called.
 */
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
}

export function createArgsValidator(options: ArgsValidatorOptions = {}): ArgsValidator {
  const maxSchemas = options.maxSchemas ?? 1000;
  if (!(Number.isInteger(maxSchemas) && maxSchemas >= 1)) throw new TypeError(`createArgsValidator: maxSchemas must be a positive whole number, got ${maxSchemas}`);
  let ajv: Promise<{ compile(schema: object): Check }> | undefined;
  /** Schema object → its check (tools built from one schema share it: see createSchemaInterner). */
  let compiled = new Map<object, Check>();
  const load = async () => {
    const { Ajv } = await import('ajv');
    return new Ajv({ allErrors: true, strict: false, useDefaults: true });
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
        return `${where} ${error.message ?? 'is invalid'}`;
      });
      return `Invalid arguments for ${tool.name}: ${problems.join('; ')}.`;
    },
  };
}
