/**
 * Validates tool arguments against each tool's JSON Schema before `execute`. Ajv is loaded
 * on the first tool call, not at start-up, and each tool's schema is compiled once.
 */
import type { Tool } from '../tool.ts';

type Check = ((data: unknown) => boolean) & { errors?: Array<{ instancePath: string; message?: string; params: Record<string, unknown> }> | null };

export interface ArgsValidator {
  /** A sentence naming what is wrong, or undefined when the arguments fit the schema. */
  validate(tool: Tool, args: unknown): Promise<string | undefined>;
}

export function createArgsValidator(): ArgsValidator {
  let ajv: Promise<{ compile(schema: object): Check }> | undefined;
  const compiled = new WeakMap<Tool, Check>();
  const load = async () => {
    const { Ajv } = await import('ajv');
    return new Ajv({ allErrors: true, strict: false, useDefaults: true });
  };
  return {
    async validate(tool, args) {
      let check = compiled.get(tool);
      if (!check) {
        ajv ??= load();
        check = (await ajv).compile(tool.parameters as object);
        compiled.set(tool, check);
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
